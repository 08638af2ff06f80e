// Package compiler turns a store snapshot into the Caddy config the gateway
// loads. Every part is built from Caddy's own config types (caddy.Config's
// admin section, reverseproxy.Handler, caddypki.PKI) and the gateway
// modules' own structs (router.Router, router.Transport, router.Selection
// …), encoded once at the end; nothing is assembled from untyped maps.
// Features that own their compile step hand it over as a Step (the
// certificates' tls app is compiled by app/certs.Compile). The golden tests beside it
// (testdata/*.golden, regenerated with `go test ./app/compiler -update`)
// pin the config compiled for representative stores.
//
// Secrets and bulk tables (credentials, private keys, the routing table)
// never enter the JSON: they are put into package configref under the
// version being compiled, and the config carries references. The caller
// keeps or drops them with the load's outcome.
package compiler

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/caddy-gateway/gateway/internal/configref"
	"github.com/caddy-gateway/gateway/internal/health"
	"github.com/caddy-gateway/gateway/internal/modpool"
	"github.com/caddy-gateway/gateway/internal/streams"
	"github.com/caddy-gateway/gateway/modules/router"
	"github.com/caddy-gateway/gateway/storage"
)

// Generated is the gateway app's compiled part: what the control plane
// compiles from the store and the gateway app provisions.
type Generated struct {
	// Version increases with every config this process compiles (it keys
	// the config's references, package configref).
	Version int64 `json:"version"`
	// ConfigVersion is the stored, cluster-wide version of the
	// configuration compiled (incremented by every committed mutation).
	ConfigVersion int64     `json:"config_version,omitempty"`
	CompiledAt    time.Time `json:"compiled_at"`
	HTTPListen    string    `json:"http_listen,omitempty"`
	HTTPSListen   string    `json:"https_listen,omitempty"`
	HTTPS         bool      `json:"https_enabled,omitempty"`
	// AllowLinkLocal is the settings' allow_link_local_destinations: the
	// outbound guard (package guard) follows the live config's.
	AllowLinkLocal bool `json:"allow_link_local_destinations,omitempty"`
	// H2C: the HTTP listener serves prior-knowledge cleartext HTTP/2.
	H2C bool `json:"h2c,omitempty"`
	// HTTP3: the HTTPS listener serves HTTP/3 too.
	HTTP3 bool `json:"http3,omitempty"`
	// RouterRaw is the gateway_router handler serving proxied traffic.
	RouterRaw json.RawMessage `json:"router,omitempty" caddy:"namespace=http.handlers inline_key=handler"`
	// Health lists every target to check (hand-written configs; the
	// gateway app resolves HealthRef into it).
	Health []health.Spec `json:"health,omitempty"`
	// HealthRef references the targets to check instead of Health: a
	// []health.Spec in package configref (10,000 targets were most of
	// the gateway app's JSON).
	HealthRef string `json:"health_ref,omitempty"`
	// Streams are the enabled TCP stream routes.
	Streams []streams.Route `json:"streams,omitempty"`
	// Counts of the compiled configuration (for /api/v1/config).
	Counts map[string]int `json:"counts,omitempty"`
}

// Options are the compile inputs that do not come from the store.
type Options struct {
	// Version is the config version being compiled; values handed by
	// reference are stored under it.
	Version int64
	// Now stamps Generated.CompiledAt.
	Now time.Time
	// Bootstrap is the gateway app's own JSON object (its Caddyfile
	// fields), into which "generated" is added.
	Bootstrap json.RawMessage
	// Base is the rest of the running Caddy config (top-level keys), kept
	// by every generated config: the user's own apps and sites.
	Base map[string]json.RawMessage
	// Previous is the routing table of the live config (nil: none), which
	// the snapshot's route changes update (Snapshot.RouteChanges).
	Previous *router.Table
	// Proxies are the service proxies compiled for the live config (nil:
	// none): a service whose rows did not change keeps its compiled
	// config (the same bytes, so the Pool keeps its proxy).
	Proxies ProxyCache
	// Pool, when set, provisions the service proxies outside the config
	// and shares them between configs (router.PooledProxies).
	Pool *modpool.Pool
	// Steps add the features' parts to the config's apps, in order, after
	// the gateway app: the certificates' tls app (app/certs.Compile).
	// The app hands them over explicitly (app/features.go).
	Steps []Step
	// PluginInternals add, per plugin type, the handler fields compiled
	// from other resources of the snapshot (a wasm plugin's module_sha256,
	// from app/wasmapi). The app hands them over explicitly too.
	PluginInternals map[string]TypeInternals
	// NodeHTTPListen and NodeHTTPSListen, when set, replace the settings'
	// listeners: this node's own (cluster nodes on one host).
	NodeHTTPListen  string
	NodeHTTPSListen string
	// Storage is Caddy's top-level storage module (nil: Caddy's default);
	// the certificate storage shared by the nodes of a cluster.
	Storage json.RawMessage
}

// A Step is a feature's compile step: it adds what the feature's stored
// rows compile into to apps (the base config's apps, keyed by app name, with
// the gateway app already compiled), keeping what the user configured
// there. Values handed by reference are put under opt.Version.
type Step func(apps map[string]json.RawMessage, snap *storage.Snapshot, opt Options) error

// Compiled is a compiled configuration.
type Compiled struct {
	// Config is the full Caddy config to load.
	Config []byte
	// Table is its routing table: Options.Previous of the next compile
	// once this config is live.
	Table *router.Table
	// Proxies are its compiled service proxies: Options.Proxies of the
	// next compile once this config is live.
	Proxies ProxyCache
}

// Config compiles snap into the full Caddy config: opt.Base with the
// gateway app replaced by the compiled one, the features' steps run (the
// stored certificates merged into the tls app), local CAs kept out of the
// host's trust store, and config autosave off.
func Config(snap *storage.Snapshot, opt Options) (*Compiled, error) {
	gen, out, err := Compile(snap, opt)
	if err != nil {
		return nil, err
	}
	gen.Version = opt.Version
	gen.ConfigVersion = snap.ConfigVersion()
	gen.CompiledAt = opt.Now
	if opt.NodeHTTPListen != "" {
		gen.HTTPListen = opt.NodeHTTPListen
	}
	if opt.NodeHTTPSListen != "" {
		gen.HTTPSListen = opt.NodeHTTPSListen
	}
	if out.Config, err = Assemble(snap, gen, opt); err != nil {
		return nil, err
	}
	return out, nil
}

// Assemble builds the full config around a compiled gateway app.
func Assemble(snap *storage.Snapshot, gen *Generated, opt Options) ([]byte, error) {
	appJSON, err := gatewayApp(opt.Bootstrap, gen)
	if err != nil {
		return nil, err
	}
	cfg := make(map[string]json.RawMessage, len(opt.Base)+1)
	for k, v := range opt.Base {
		cfg[k] = v
	}
	apps := map[string]json.RawMessage{}
	if raw, ok := cfg["apps"]; ok {
		if err := json.Unmarshal(raw, &apps); err != nil {
			return nil, fmt.Errorf("reading base config apps: %w", err)
		}
	}
	apps["gateway"] = appJSON
	for _, step := range opt.Steps {
		if err := step(apps, snap, opt); err != nil {
			return nil, err
		}
	}
	if err := mergePKIApp(apps); err != nil {
		return nil, err
	}
	if cfg["apps"], err = json.Marshal(apps); err != nil {
		return nil, err
	}
	if cfg["admin"], err = adminConfig(cfg["admin"]); err != nil {
		return nil, err
	}
	if opt.Storage != nil {
		cfg["storage"] = opt.Storage
	}
	return json.Marshal(cfg)
}

// gatewayApp is the gateway app's JSON: its bootstrap fields and the
// compiled part under "generated".
func gatewayApp(bootstrap json.RawMessage, gen *Generated) (json.RawMessage, error) {
	app := map[string]json.RawMessage{}
	if len(bootstrap) > 0 {
		if err := json.Unmarshal(bootstrap, &app); err != nil {
			return nil, fmt.Errorf("reading the gateway bootstrap: %w", err)
		}
	}
	raw, err := json.Marshal(gen)
	if err != nil {
		return nil, fmt.Errorf("encoding gateway app: %w", err)
	}
	app["generated"] = raw
	return json.Marshal(app)
}

// Compile compiles the gateway part of the config, updating opt.Previous
// (the live routing table, or nil) with the snapshot's route changes and
// reusing opt.Proxies; the Compiled it returns has no Config yet.
func Compile(snap *storage.Snapshot, opt Options) (*Generated, *Compiled, error) {
	idx := indexSnapshot(snap)
	s := snap.Settings
	gen := &Generated{
		HTTPListen:     s.HTTPListen,
		HTTPSListen:    s.HTTPSListen,
		HTTPS:          s.HTTPSEnabled,
		AllowLinkLocal: s.AllowLinkLocalDestinations,
		H2C:            s.H2C,
		HTTP3:          s.HTTP3,
		Counts: map[string]int{
			"services":      len(snap.Services),
			"targets":       len(snap.Targets),
			"routes":        snap.RouteCount(),
			"stream_routes": len(snap.StreamRoutes),
			"plugins":       len(snap.Plugins),
			"consumers":     len(snap.Consumers),
			"credentials":   len(snap.Credentials),
		},
	}
	maps.Copy(gen.Counts, snap.TableSizes()) // certificates, wasm modules
	out := &Compiled{}
	raw, err := compileRouter(snap, idx, opt, out)
	if err != nil {
		return nil, nil, err
	}
	gen.RouterRaw = raw
	// Every target of every service: bulk, by reference.
	gen.HealthRef = configref.Put(opt.Version, "health", compileHealth(snap, idx))
	gen.Streams = compileStreams(snap, idx)
	return gen, out, nil
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
			HTTPS:   svc.Protocol == "https" || svc.Protocol == "grpcs",
			GRPC:    IsGRPC(svc.Protocol),
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
			ConnectTimeoutMS: svc.ConnectTimeoutMS, IdleTimeoutMS: svc.ReadTimeoutMS, WriteTimeoutMS: svc.WriteTimeoutMS,
			Retries: int(svc.Retries), Targets: addrs, Weights: weights})
	}
	return out
}
