// Package apps is the admin API of applications: a composite create that
// publishes one domain to one upstream origin in a single mutation, and a
// reachability probe of an upstream origin.
//
//	POST /api/v1/applications
//	POST /api/v1/applications/test-upstream
//
// An application is not a stored resource of its own: the create writes an
// ordinary service, target, route and route-scoped plugins, which are then
// managed through their own endpoints.
package apps

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/pluginapi"
	"github.com/caddy-gateway/gateway/modules/plugins/traffic"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

const createDescription = "One transaction creates a service (protocol and port from upstream_url; tls_sni = the upstream host when it is an https name), " +
	"one target, a route with hosts [domain], and as requested route-scoped plugins: redirect (to_https, 308) for https, " +
	"hsts (max_age_s 31536000, no subdomains, no preload) for hsts, ip-restriction (allow = allowed_cidrs) for a non-empty allowed_cidrs. " +
	"That ip-restriction would shadow an enabled global one for the new route (the most specific instance of a type applies), so the global one is folded in: " +
	"its deny list, status and message are kept and its allow list (when non-empty) narrows allowed_cidrs to the addresses both allow (none left: every client is denied). " +
	"The configuration is hot-reloaded once, after everything is written; on any failure nothing is stored. " +
	"400 when the domain exactly equals (case-insensitively) a host of an existing route, when https is true without settings.https_enabled " +
	"or without an issued certificate matching the domain (an active certificate with the domain among its names, exactly or by wildcard), " +
	"and when hsts is true without https. Global plugins apply to the new route as to every route; DNS is not changed. " +
	"The created resources are managed through their own endpoints afterwards."

const probeDescription = "Sends one GET to the origin (path /) with a 5-second timeout, verified upstream TLS, no environment proxy settings and no redirect following; " +
	"the response body is not read. Any HTTP status (a 3xx included) counts as reachable. Connection, DNS, TLS and timeout failures are answered " +
	"in the 200 body (reachable false, status null, message saying why). Nothing is written."

// Endpoints are the application endpoints.
func Endpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "POST", Path: "/api/v1/applications", Role: api.RoleEditor, Tag: "applications",
			Summary:     "Create an application: service, target, route and plugins for one domain in one transaction",
			Description: createDescription,
			Body:        ApplicationSpec{}, Response: ApplicationCreated{}, Statuses: []int{400},
			Handle: createApplication},
		{Method: "POST", Path: "/api/v1/applications/test-upstream", Role: api.RoleEditor, Tag: "applications",
			Summary:     "Probe an upstream origin (one GET, nothing written)",
			Description: probeDescription,
			Body:        UpstreamTest{}, Response: UpstreamProbe{}, Statuses: []int{400},
			Handle: testUpstream},
	}
}

// issuedCertificateMatching reports whether an issued certificate matches
// domain (docs/tls.md: a certificate is issued when it is active, and it
// matches when one of its names equals the domain exactly or by wildcard).
var issuedCertificateMatching = certs.Matching

func createApplication(c *api.Call) (any, error) {
	spec := new(ApplicationSpec)
	if err := c.Decode(spec); err != nil {
		return nil, err
	}
	out := &ApplicationCreated{Name: spec.Name, PluginIDs: []int64{}}
	err := c.CP.Mutate(c.Ctx(), func(tx *gorm.DB) error {
		var settings storage.Settings
		if err := tx.First(&settings, 1).Error; err != nil {
			return fmt.Errorf("reading settings: %w", err)
		}
		if err := checkDomainFree(tx, spec.Domain); err != nil {
			return err
		}
		if spec.HTTPS {
			if !settings.HTTPSEnabled {
				return schema.Errorf("https", "requires an enabled HTTPS listener (settings.https_enabled is false)")
			}
			ok, err := issuedCertificateMatching(tx, spec.Domain)
			if err != nil {
				return fmt.Errorf("looking up certificates: %w", err)
			}
			if !ok {
				return schema.Errorf("https", "no issued certificate matches %s", spec.Domain)
			}
		}
		ids, err := write(c.CP, tx, spec)
		if err != nil {
			return err
		}
		out.ServiceID, out.TargetID, out.RouteID, out.PluginIDs = ids.service, ids.target, ids.route, ids.plugins
		out.URL = applicationURL(c.CP, &settings, spec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkDomainFree refuses a domain that exactly equals a host of an
// existing route (hosts match case-insensitively, so the comparison is
// too). A wildcard route covering the domain is no conflict: the exact
// host wins over it.
func checkDomainFree(tx *gorm.DB, domain string) error {
	var routes []storage.Route
	if err := tx.Select("id", "hosts").Find(&routes).Error; err != nil {
		return fmt.Errorf("reading routes: %w", err)
	}
	for _, r := range routes {
		for _, h := range r.Hosts {
			if strings.EqualFold(h, domain) {
				return schema.Errorf("domain", "%s is already a host of route %d", domain, r.ID)
			}
		}
	}
	return nil
}

type created struct {
	service, target, route int64
	plugins                []int64
}

// write creates the application's rows inside cp's mutation's transaction.
func write(cp *controlplane.ControlPlane, tx *gorm.DB, spec *ApplicationSpec) (*created, error) {
	up := spec.upstream
	svc, err := insert(tx, func(s *storage.Service) {
		s.Name = spec.Name
		s.Protocol = up.Scheme
		if up.Scheme == "https" && !up.IsIP {
			sni := up.Host
			s.TLSSNI = &sni
		}
	})
	if err != nil {
		return nil, err
	}
	tgt, err := insert(tx, func(t *storage.Target) { t.ServiceID, t.Host, t.Port = svc.ID, up.Host, up.Port })
	if err != nil {
		return nil, err
	}
	rt, err := insert(tx, func(r *storage.Route) { r.Name, r.ServiceID, r.Hosts = spec.Name, svc.ID, []string{spec.Domain} })
	if err != nil {
		return nil, err
	}

	ids := &created{service: svc.ID, target: tgt.ID, route: rt.ID, plugins: []int64{}}
	type want struct {
		typ string
		cfg any
	}
	var wanted []want
	if spec.HTTPS {
		wanted = append(wanted, want{"redirect", map[string]any{"to_https": true, "status": 308}})
	}
	if spec.HSTS {
		wanted = append(wanted, want{"hsts", map[string]any{"max_age_s": 31536000, "include_subdomains": false, "preload": false}})
	}
	if len(spec.AllowedCIDRs) > 0 {
		cfg, err := ipRestriction(tx, spec.AllowedCIDRs)
		if err != nil {
			return nil, err
		}
		wanted = append(wanted, want{"ip-restriction", cfg})
	}
	for _, w := range wanted {
		cfg, err := json.Marshal(w.cfg)
		if err != nil {
			return nil, err
		}
		p, err := insert(tx, func(p *storage.Plugin) {
			routeID := rt.ID
			p.Type, p.Scope, p.RouteID, p.Config = w.typ, "route", &routeID, cfg
		}, func(p *storage.Plugin) error {
			// The plugin API's own checks: type, references, the config
			// through plugins.NormalizeConfig, default ordering and one
			// plugin of a type per scope target.
			if err := pluginapi.CheckPlugin(cp, tx, p); err != nil {
				return fmt.Errorf("%s plugin: %w", w.typ, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		ids.plugins = append(ids.plugins, p.ID)
	}
	return ids, nil
}

// ipRestriction is the config of the application's ip-restriction plugin.
// allowed_cidrs is an extra restriction and the global policies still
// apply to the new route, but a route's ip-restriction shadows a global
// one (the most specific enabled instance of a type applies). So the
// enabled global ip-restriction, when there is one, is folded in: its deny
// list, status and message are kept, and its allow list (when non-empty)
// narrows allowed to the addresses both allow. When no address is left,
// every client is denied. A later change of the global plugin does not
// reach the route: its own plugin is the one that applies.
func ipRestriction(tx *gorm.DB, allowed []string) (*traffic.IPRestriction, error) {
	cfg := new(traffic.IPRestriction)
	cfg.SetDefaults()
	// The one the compiler applies when several are enabled: the last by id.
	var globals []storage.Plugin
	if err := tx.Where("type = ? AND scope = ? AND enabled = ?", "ip-restriction", "global", true).
		Order("id DESC").Limit(1).Find(&globals).Error; err != nil {
		return nil, fmt.Errorf("reading the global ip-restriction plugin: %w", err)
	}
	if len(globals) == 0 {
		cfg.Allow = allowed
		return cfg, nil
	}
	if err := json.Unmarshal(globals[0].Config, cfg); err != nil {
		return nil, fmt.Errorf("reading the global ip-restriction plugin %d: %w", globals[0].ID, err)
	}
	if len(cfg.Allow) == 0 {
		cfg.Allow = allowed
	} else {
		var err error
		if cfg.Allow, err = intersectCIDRs(allowed, cfg.Allow); err != nil {
			return nil, err
		}
	}
	if len(cfg.Allow) == 0 {
		cfg.Deny = append(cfg.Deny, "0.0.0.0/0", "::/0")
	}
	return cfg, nil
}

// intersectCIDRs lists the addresses both lists of IPs and CIDRs contain:
// an entry of a inside an entry of b, else the entries of b inside it
// (two prefixes either nest or are disjoint). Entries keep their spelling.
func intersectCIDRs(a, b []string) ([]string, error) {
	pa, err := traffic.ParsePrefixes("allowed_cidrs", a)
	if err != nil {
		return nil, err
	}
	pb, err := traffic.ParsePrefixes("allow", b)
	if err != nil {
		return nil, err
	}
	out := []string{}
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for i, x := range pa {
		covered := false
		for _, y := range pb {
			if y.Bits() <= x.Bits() && y.Contains(x.Addr()) {
				covered = true
				break
			}
		}
		if covered {
			add(a[i])
			continue
		}
		for j, y := range pb {
			if x.Bits() <= y.Bits() && x.Contains(y.Addr()) {
				add(b[j])
			}
		}
	}
	return out, nil
}

// insert stores a new row of T: its defaults, then what set sets, checked
// by the declaration's rules as its own endpoint checks it (and by the
// further checks), in tx.
func insert[T any, PT interface {
	*T
	SetDefaults()
}](tx *gorm.DB, set func(*T), checks ...func(*T) error) (*T, error) {
	v := new(T)
	PT(v).SetDefaults()
	set(v)
	if err := schema.Check(v); err != nil {
		return nil, err
	}
	for _, check := range checks {
		if err := check(v); err != nil {
			return nil, err
		}
	}
	if err := tx.Create(v).Error; err != nil {
		return nil, err
	}
	return v, nil
}

// applicationURL is https://<domain> when https is true, else
// http://<domain>, with :<port> when the matching listener's port is not
// 443 / 80 (docs/tls.md). The port is the configured listener's, or the
// bound one when the configured port is 0.
func applicationURL(cp *controlplane.ControlPlane, s *storage.Settings, spec *ApplicationSpec) string {
	scheme, listen, std := "http", s.HTTPListen, 80
	if spec.HTTPS {
		scheme, listen, std = "https", s.HTTPSListen, 443
	}
	port := storage.ListenPort(listen)
	if port == 0 {
		port = storage.ListenPort(cp.ProxyAddr(spec.HTTPS))
	}
	if port == 0 || port == std {
		return scheme + "://" + spec.Domain
	}
	return scheme + "://" + spec.Domain + ":" + strconv.Itoa(port)
}
