package controlplane

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/mholt/acmez/v3/acme"

	"github.com/caddy-gateway/gateway/modules/configref"
	"github.com/caddy-gateway/gateway/modules/consumers"
	"github.com/caddy-gateway/gateway/modules/gwtls"
	"github.com/caddy-gateway/gateway/modules/health"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/router"
	"github.com/caddy-gateway/gateway/modules/streams"
	"github.com/caddy-gateway/gateway/storage"
)

// streamCloseDelay keeps proxied WebSockets and other hijacked streams open
// across config reloads (Caddy closes them when the old proxy is cleaned up
// otherwise; caddy issues #5471, #7222).
const streamCloseDelay = "24h"

// passive health: failed proxied connections count against a target.
const (
	passiveFailDuration = "10s"
	passiveMaxFails     = 2
)

// compile turns a store snapshot into the full Caddy config to load: the
// captured base config with the gateway app replaced by the compiled one.
//
// Secrets and tables that must not be readable from Caddy's admin endpoint
// are put into package configref under the new version and referenced from
// the config; the caller keeps or drops them with the load's outcome
// (ControlPlane.load).
func (cp *ControlPlane) compile(snap *storage.Snapshot) ([]byte, int64, error) {
	version := cp.version.Add(1)
	cfg, err := cp.compileVersion(snap, version)
	if err != nil {
		configref.Drop(version)
		return nil, 0, err
	}
	return cfg, version, nil
}

func (cp *ControlPlane) compileVersion(snap *storage.Snapshot, version int64) ([]byte, error) {
	gen, err := compileGenerated(snap, version)
	if err != nil {
		return nil, err
	}
	gen.Version = version
	gen.CompiledAt = time.Now().UTC()

	appJSON, err := json.Marshal(struct {
		Bootstrap
		Generated *Generated `json:"generated"`
	}{cp.boot, gen})
	if err != nil {
		return nil, fmt.Errorf("encoding gateway app: %w", err)
	}
	cfg := make(map[string]json.RawMessage, len(cp.base)+1)
	for k, v := range cp.base {
		cfg[k] = v
	}
	apps := map[string]json.RawMessage{}
	if raw, ok := cfg["apps"]; ok {
		if err := json.Unmarshal(raw, &apps); err != nil {
			return nil, fmt.Errorf("reading base config apps: %w", err)
		}
	}
	apps["gateway"] = appJSON
	if err := compileTLSApp(apps, snap, &cp.boot, version); err != nil {
		return nil, err
	}
	if err := compilePKIApp(apps); err != nil {
		return nil, err
	}
	if cfg["apps"], err = json.Marshal(apps); err != nil {
		return nil, err
	}
	// The store is the source of truth, and generated configs carry
	// secrets: Caddy must not autosave them.
	admin := map[string]any{}
	if raw, ok := cfg["admin"]; ok {
		_ = json.Unmarshal(raw, &admin)
	}
	conf, _ := admin["config"].(map[string]any)
	if conf == nil {
		conf = map[string]any{}
	}
	conf["persist"] = false
	admin["config"] = conf
	if cfg["admin"], err = json.Marshal(admin); err != nil {
		return nil, err
	}
	return json.Marshal(cfg)
}

// snapIndex looks up a snapshot's services and their targets by id; built
// once per compile.
type snapIndex struct {
	services map[int64]*storage.Service
	targets  map[int64][]storage.Target // by service id, in id order
}

func indexSnapshot(snap *storage.Snapshot) *snapIndex {
	idx := &snapIndex{services: make(map[int64]*storage.Service, len(snap.Services)), targets: map[int64][]storage.Target{}}
	for i := range snap.Services {
		idx.services[snap.Services[i].ID] = &snap.Services[i]
	}
	for _, t := range snap.Targets {
		idx.targets[t.ServiceID] = append(idx.targets[t.ServiceID], t)
	}
	return idx
}

// compileGenerated compiles the gateway part of the config.
func compileGenerated(snap *storage.Snapshot, version int64) (*Generated, error) {
	idx := indexSnapshot(snap)
	s := snap.Settings
	gen := &Generated{
		HTTPListen:  s.HTTPListen,
		HTTPSListen: s.HTTPSListen,
		HTTPS:       s.HTTPSEnabled,
		Counts: map[string]int{
			"services":      len(snap.Services),
			"targets":       len(snap.Targets),
			"routes":        len(snap.Routes),
			"stream_routes": len(snap.StreamRoutes),
			"plugins":       len(snap.Plugins),
			"consumers":     len(snap.Consumers),
			"credentials":   len(snap.Credentials),
			"certificates":  len(snap.Certificates()),
			"wasm_modules":  len(snap.WasmModules()),
		},
	}
	rt, err := compileRouter(snap, idx, version)
	if err != nil {
		return nil, err
	}
	if gen.RouterRaw, err = json.Marshal(rt); err != nil {
		return nil, fmt.Errorf("encoding router: %w", err)
	}
	gen.Health = compileHealth(snap, idx)
	gen.Streams = compileStreams(snap, idx)
	return gen, nil
}

// routerJSON is the gateway_router handler's config with its handler key.
type routerJSON struct {
	Handler string `json:"handler"`
	router.Router
}

func compileRouter(snap *storage.Snapshot, idx *snapIndex, version int64) (*routerJSON, error) {
	rt := &routerJSON{Handler: "gateway_router"}
	rt.TrustedProxies = snap.Settings.TrustedProxies
	if _, port, err := net.SplitHostPort(snap.Settings.HTTPSListen); err == nil {
		rt.HTTPSPort, _ = strconv.Atoi(port)
	}

	chains := effectivePlugins(snap)
	usedPlugins := map[int64]bool{}
	usedServices := map[int64]bool{}
	routes := make([]router.Route, 0, len(snap.Routes))
	for _, r := range snap.Routes {
		if !r.Enabled {
			continue
		}
		cr := router.Route{
			ID: r.ID, Name: r.Name, ServiceID: r.ServiceID, Priority: r.Priority,
			Hosts: r.Hosts, Paths: r.Paths, Methods: r.Methods, Headers: r.Headers,
			StripPath: r.StripPath, PreserveHost: r.PreserveHost,
		}
		usedServices[r.ServiceID] = true
		for _, sp := range r.Splits {
			cr.Splits = append(cr.Splits, router.Split{ServiceID: sp.ServiceID, Weight: sp.Weight})
			usedServices[sp.ServiceID] = true
		}
		for _, p := range chains[r.ID] {
			cr.Plugins = append(cr.Plugins, p.ID)
			usedPlugins[p.ID] = true
		}
		routes = append(routes, cr)
	}

	// The routing table is bulk: it goes by reference.
	rt.RoutesRef = configref.Put(version, "routes", routes)

	rt.ServicesRaw = map[string]json.RawMessage{}
	for id := range usedServices {
		svc, ok := idx.services[id]
		if !ok {
			return nil, fmt.Errorf("a route references service %d, which does not exist", id)
		}
		raw, err := json.Marshal(compileProxy(svc, idx.targets[id]))
		if err != nil {
			return nil, err
		}
		rt.ServicesRaw[strconv.FormatInt(id, 10)] = raw
	}

	rt.PluginsRaw = map[string]json.RawMessage{}
	for _, p := range snap.Plugins {
		if !usedPlugins[p.ID] {
			continue
		}
		internals := pluginInternals(&p)
		if f := typeInternals[p.Type]; f != nil {
			extra, err := f(snap, &p)
			if err != nil {
				return nil, err
			}
			for k, v := range extra {
				internals[k] = v
			}
		}
		raw, err := plugins.HandlerJSON(p.Type, p.Config, internals)
		if err != nil {
			return nil, err
		}
		rt.PluginsRaw[strconv.FormatInt(p.ID, 10)] = raw
	}

	// Credentials are secrets: the table goes by reference.
	rt.ConsumersRef = configref.Put(version, "consumers", consumers.NewTable(compileConsumers(snap)))
	return rt, nil
}

// pluginInternals are the fields the compiler adds to a plugin instance's
// handler config that are not part of its API config: the instance id that
// keys its process-wide state (rate-limit counters, cache entries, log
// queues) so that the state survives reloads. It mixes the row's creation
// time into the id: SQLite may give a new plugin the id of the last deleted
// one, which must not inherit that one's counters.
func pluginInternals(p *storage.Plugin) map[string]any {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", p.ID, p.CreatedAt.UnixNano())
	return map[string]any{"instance_id": int64(h.Sum64() >> 1)}
}

// TypeInternals returns the compiler-set fields of one plugin type's handler
// config that come from other resources of the snapshot (a wasm plugin's
// module_sha256: the module's bytes reach the handler by reference, never
// through Caddy's JSON). An error fails the mutation (a FieldError is 400).
type TypeInternals func(snap *storage.Snapshot, p *storage.Plugin) (map[string]any, error)

var typeInternals = map[string]TypeInternals{}

// RegisterTypeInternals installs the internals of a plugin type. Call from
// init only.
func RegisterTypeInternals(typeName string, f TypeInternals) { typeInternals[typeName] = f }

// effectivePlugins resolves, for every route, the most specific enabled
// instance of each plugin type (route > service > global) and orders them
// by ordering, then id.
func effectivePlugins(snap *storage.Snapshot) map[int64][]*storage.Plugin {
	global := map[string]*storage.Plugin{}
	byService := map[int64]map[string]*storage.Plugin{}
	byRoute := map[int64]map[string]*storage.Plugin{}
	for i := range snap.Plugins {
		p := &snap.Plugins[i]
		if !p.Enabled {
			continue // a disabled plugin neither applies nor shadows
		}
		switch {
		case p.Scope == "route" && p.RouteID != nil:
			if byRoute[*p.RouteID] == nil {
				byRoute[*p.RouteID] = map[string]*storage.Plugin{}
			}
			byRoute[*p.RouteID][p.Type] = p
		case p.Scope == "service" && p.ServiceID != nil:
			if byService[*p.ServiceID] == nil {
				byService[*p.ServiceID] = map[string]*storage.Plugin{}
			}
			byService[*p.ServiceID][p.Type] = p
		case p.Scope == "global":
			global[p.Type] = p
		}
	}
	out := map[int64][]*storage.Plugin{}
	for _, r := range snap.Routes {
		eff := map[string]*storage.Plugin{}
		for t, p := range global {
			eff[t] = p
		}
		for t, p := range byService[r.ServiceID] {
			eff[t] = p
		}
		for t, p := range byRoute[r.ID] {
			eff[t] = p
		}
		if len(eff) == 0 {
			continue
		}
		list := make([]*storage.Plugin, 0, len(eff))
		for _, p := range eff {
			list = append(list, p)
		}
		sort.Slice(list, func(i, j int) bool { return pluginLess(list[i], list[j]) })
		out[r.ID] = list
	}
	return out
}

// pluginLess orders plugins by ordering, then id (lists and chains alike).
func pluginLess(a, b *storage.Plugin) bool {
	oa, ob := ordering(a), ordering(b)
	if oa != ob {
		return oa < ob
	}
	return a.ID < b.ID
}

func ordering(p *storage.Plugin) int32 {
	if p.Ordering != nil {
		return *p.Ordering
	}
	if t, ok := plugins.Lookup(p.Type); ok {
		return int32(t.Ordering)
	}
	return 0
}

// compileProxy is the reverse_proxy handler of one service.
func compileProxy(svc *storage.Service, targets []storage.Target) map[string]any {
	addrs, weights := liveTargets(targets)
	ups := make([]map[string]any, 0, len(addrs))
	for _, a := range addrs {
		ups = append(ups, map[string]any{"dial": a})
	}
	transport := map[string]any{
		"protocol":                "gateway_http", // Caddy's http transport, its peers guarded (router.Transport)
		"dial_timeout":            ms(svc.ConnectTimeoutMS),
		"response_header_timeout": ms(svc.ReadTimeoutMS),
		"read_timeout":            ms(svc.ReadTimeoutMS),
		"write_timeout":           ms(svc.WriteTimeoutMS),
	}
	if svc.Protocol == "https" {
		tlsCfg := map[string]any{}
		if svc.TLSSNI != nil && *svc.TLSSNI != "" {
			tlsCfg["server_name"] = *svc.TLSSNI
		}
		transport["tls"] = tlsCfg
	}
	policy := map[string]any{"policy": "gateway", "algorithm": svc.LBAlgorithm, "service_id": svc.ID}
	if svc.LBAlgorithm == "weighted" {
		policy["weights"] = weights
	}
	lb := map[string]any{"selection_policy": policy}
	if svc.Retries > 0 {
		lb["retries"] = svc.Retries
	}
	return map[string]any{
		"handler":        "reverse_proxy",
		"upstreams":      ups,
		"transport":      transport,
		"load_balancing": lb,
		"health_checks": map[string]any{
			"passive": map[string]any{"fail_duration": passiveFailDuration, "max_fails": passiveMaxFails},
		},
		"headers": map[string]any{
			"request": map[string]any{"set": map[string][]string{"Host": {router.UpstreamHostHeader}}},
		},
		"stream_close_delay": streamCloseDelay,
	}
}

// liveTargets are the dial addresses of the targets that take traffic (weight
// 0 or enabled false takes a target out), with their summed weights.
func liveTargets(targets []storage.Target) (addrs []string, weights map[string]int) {
	weights = map[string]int{}
	for _, t := range targets {
		if !t.Enabled || t.Weight <= 0 {
			continue
		}
		if _, dup := weights[t.Addr()]; !dup {
			addrs = append(addrs, t.Addr())
		}
		weights[t.Addr()] += int(t.Weight)
	}
	return addrs, weights
}

// ms renders milliseconds as a Caddy duration; 0 means no timeout.
func ms(n int64) any {
	if n <= 0 {
		return 0
	}
	return strconv.FormatInt(n, 10) + "ms"
}

// compileHealth lists every target of every service, routed or not.
func compileHealth(snap *storage.Snapshot, idx *snapIndex) []health.Spec {
	var out []health.Spec
	for _, t := range snap.Targets {
		svc := idx.services[t.ServiceID]
		if svc == nil {
			continue
		}
		spec := health.Spec{
			ServiceID: svc.ID, TargetID: t.ID, Host: t.Host, Port: t.Port,
			HTTPS:   svc.Protocol == "https",
			Timeout: time.Duration(svc.ConnectTimeoutMS) * time.Millisecond,
		}
		if svc.HealthPath != nil {
			spec.Path = *svc.HealthPath
		}
		if svc.TLSSNI != nil {
			spec.SNI = *svc.TLSSNI
		}
		out = append(out, spec)
	}
	return out
}

// compileStreams lists the enabled stream routes with their service's
// targets and balancing settings.
func compileStreams(snap *storage.Snapshot, idx *snapIndex) []streams.Route {
	var out []streams.Route
	for _, sr := range snap.StreamRoutes {
		svc := idx.services[sr.ServiceID]
		if !sr.Enabled || svc == nil {
			continue
		}
		addrs, weights := liveTargets(idx.targets[svc.ID])
		out = append(out, streams.Route{ID: sr.ID, ListenAddr: sr.ListenAddr, ServiceID: svc.ID, Algorithm: svc.LBAlgorithm,
			ConnectTimeoutMS: svc.ConnectTimeoutMS, Retries: int(svc.Retries), Targets: addrs, Weights: weights})
	}
	return out
}

// compileConsumers builds the consumer table the auth plugins read.
func compileConsumers(snap *storage.Snapshot) []consumers.Consumer {
	byID := map[int64]int{}
	out := make([]consumers.Consumer, 0, len(snap.Consumers))
	for _, c := range snap.Consumers {
		byID[c.ID] = len(out)
		out = append(out, consumers.Consumer{ID: c.ID, Username: c.Username, CustomID: c.CustomID, Groups: c.Groups})
	}
	for _, cr := range snap.Credentials {
		i, ok := byID[cr.ConsumerID]
		if !ok {
			continue
		}
		out[i].Credentials = append(out[i].Credentials, consumers.Credential{
			ID: cr.ID, Type: cr.Type, Key: deref(cr.Key), Username: deref(cr.Username),
			PasswordHash: cr.PasswordHash, Algorithm: deref(cr.Algorithm), Secret: cr.Secret,
			PublicKey: deref(cr.PublicKey),
		})
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// CertificateTag tags a certificate loaded from the store in the tls app.
func CertificateTag(id int64) string { return "gateway-certificate-" + strconv.FormatInt(id, 10) }

// compilePKIApp makes sure Caddy never installs a local CA root into the
// host's trust store (Caddy's skip_install_trust): every CA of the base
// config's pki app, and the default "local" CA that Caddy's internal issuer
// would otherwise create with trust installation on (for a user site on
// localhost or an IP), get install_trust false. A gateway must not change
// the trust of the machine it runs on.
func compilePKIApp(apps map[string]json.RawMessage) error {
	pki := map[string]any{}
	if raw, ok := apps["pki"]; ok {
		if err := json.Unmarshal(raw, &pki); err != nil {
			return fmt.Errorf("reading the base config's pki app: %w", err)
		}
	}
	cas, _ := pki["certificate_authorities"].(map[string]any)
	if cas == nil {
		cas = map[string]any{}
	}
	if _, ok := cas["local"]; !ok {
		cas["local"] = map[string]any{}
	}
	for id, v := range cas {
		ca, _ := v.(map[string]any)
		if ca == nil {
			ca = map[string]any{}
		}
		ca["install_trust"] = false
		cas[id] = ca
	}
	pki["certificate_authorities"] = cas
	raw, err := json.Marshal(pki)
	if err != nil {
		return err
	}
	apps["pki"] = raw
	return nil
}

// compileTLSApp merges the stored certificates into the tls app of the base
// config (the user's own tls app is kept): uploaded pairs are added to
// certificates.load_pem, tagged with their id; ACME names are added to
// certificates.automate with an automation policy per certificate, placed
// before the user's policies (the first matching policy wins). Certificates
// are then selected by SNI by the HTTPS listener's empty connection policy.
//
// Private keys, the Cloudflare token and EAB keys are secrets: they reach
// the tls app's modules by reference (package configref, modules/gwtls):
// uploaded pairs through the tls.certificates.gateway loader, EAB through
// the tls.issuance.gateway_acme issuer, the token through the Cloudflare
// provider's api_token_ref.
func compileTLSApp(apps map[string]json.RawMessage, snap *storage.Snapshot, boot *Bootstrap, version int64) error {
	certs := snap.Certificates()
	if len(certs) == 0 {
		return nil
	}
	tlsApp := map[string]any{}
	if raw, ok := apps["tls"]; ok {
		if err := json.Unmarshal(raw, &tlsApp); err != nil {
			return fmt.Errorf("reading the base config's tls app: %w", err)
		}
	}
	certsObj, _ := tlsApp["certificates"].(map[string]any)
	if certsObj == nil {
		certsObj = map[string]any{}
	}
	var pairs []gwtls.Pair
	automate, _ := certsObj["automate"].([]any)
	var policies []any
	s := snap.Settings
	for _, c := range certs {
		if !c.ACME {
			pairs = append(pairs, gwtls.Pair{CertPEM: c.CertPEM, KeyPEM: c.KeyPEM, Tags: []string{CertificateTag(c.ID)}})
			continue
		}
		token := snap.CloudflareToken()
		if c.Challenge == "dns-01" && token == "" {
			continue // no DNS provider credentials: not managed (stays pending)
		}
		for _, d := range c.Domains {
			automate = append(automate, d)
		}
		dir := storage.NormalizeACMEDirectory(s.ACMEDirectoryURL)
		issuer := map[string]any{"module": "gateway_acme", "ca": dir}
		if eab := snap.EABFor(dir); eab != nil {
			issuer["external_account_ref"] = configref.Put(version, "eab/"+dir, &acme.EAB{KeyID: eab.KeyID, MACKey: eab.MACKey})
		}
		if s.ACMEEmail != "" {
			issuer["email"] = s.ACMEEmail
		}
		if len(boot.ACMETrustedRoots) > 0 {
			issuer["trusted_roots_pem_files"] = boot.ACMETrustedRoots
		}
		challenges := map[string]any{}
		switch c.Challenge {
		case "tls-alpn-01":
			challenges["http"] = map[string]any{"disabled": true}
			if _, port, err := net.SplitHostPort(s.HTTPSListen); err == nil {
				n, _ := strconv.Atoi(port)
				challenges["tls-alpn"] = map[string]any{"alternate_port": n}
			}
		case "dns-01":
			provider := map[string]any{"name": "cloudflare", "api_token_ref": configref.Put(version, "cloudflare_token", token)}
			if boot.CloudflareAPIURL != "" {
				provider["base_url"] = boot.CloudflareAPIURL
			}
			dns := map[string]any{"provider": provider}
			if len(boot.ACMEDNSResolvers) > 0 {
				dns["resolvers"] = boot.ACMEDNSResolvers
				dns["propagation_timeout"] = -1
			}
			challenges["dns"] = dns
			challenges["http"] = map[string]any{"disabled": true}
			challenges["tls-alpn"] = map[string]any{"disabled": true}
		default: // http-01: answered by the gateway's HTTP listener
			challenges["tls-alpn"] = map[string]any{"disabled": true}
			if _, port, err := net.SplitHostPort(s.HTTPListen); err == nil {
				n, _ := strconv.Atoi(port)
				challenges["http"] = map[string]any{"alternate_port": n}
			}
		}
		issuer["challenges"] = challenges
		policies = append(policies, map[string]any{"subjects": c.Domains, "issuers": []any{issuer}})
	}
	if len(pairs) > 0 {
		certsObj["gateway"] = map[string]any{"ref": configref.Put(version, "certificates", pairs)}
	}
	if len(automate) > 0 {
		certsObj["automate"] = automate
	}
	tlsApp["certificates"] = certsObj
	if len(policies) > 0 {
		automation, _ := tlsApp["automation"].(map[string]any)
		if automation == nil {
			automation = map[string]any{}
		}
		existing, _ := automation["policies"].([]any)
		automation["policies"] = append(policies, existing...)
		tlsApp["automation"] = automation
	}
	raw, err := json.Marshal(tlsApp)
	if err != nil {
		return err
	}
	apps["tls"] = raw
	return nil
}
