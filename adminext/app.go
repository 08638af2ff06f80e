// Package adminext is the gateway's control plane: the `gateway` Caddy app,
// the store, the admin REST API and dashboard, and the process-level proxy
// servers. A mutation persists, compiles a fresh Caddy config and loads it
// with caddy.Load before it answers; everything that must survive those
// reloads (store, admin server, proxy listeners and servers, health checks)
// belongs to the ControlPlane, which lives for the whole process, not to an
// App instance (see process.go).
package adminext

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/modules/health"
	"github.com/caddy-gateway/gateway/modules/router"
	"github.com/caddy-gateway/gateway/modules/streams"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the `gateway` Caddy app. Its bootstrap fields come from the
// Caddyfile's `gateway` global option (or JSON); Generated is written by the
// control plane's config compiler and absent from hand-written configs.
type App struct {
	Bootstrap

	// Generated is the compiled gateway configuration.
	Generated *Generated `json:"generated,omitempty"`

	cp        *ControlPlane
	router    *router.Router
	tlsConfig *tls.Config
	tlsApp    *caddytls.TLS // the tls app of this config (HTTP-01 challenges)
	logger    *zap.Logger
	prev      atomic.Pointer[App] // the app live when this one started, until it stops
	stopped   atomic.Bool         // Stop was called
}

// Bootstrap is what the gateway needs before it can read its store: where
// the store and the admin API are, and the listeners that seed a fresh store.
type Bootstrap struct {
	// AdminListen is the address of the gateway admin API, dashboard,
	// /metrics and /healthz. Default 127.0.0.1:9080.
	AdminListen string `json:"admin_listen,omitempty"`
	// Database is "sqlite" (default) or "postgres".
	Database string `json:"database,omitempty"`
	// DSN is the SQLite file (default ./data/gateway.db) or the PostgreSQL
	// connection string.
	DSN string `json:"dsn,omitempty"`
	// HTTPListen and HTTPSListen seed the settings of a fresh store
	// (defaults :8080 and :8443); afterwards the settings resource decides.
	HTTPListen  string `json:"http_listen,omitempty"`
	HTTPSListen string `json:"https_listen,omitempty"`
	// CaddyAdmin is Caddy's own admin endpoint, read once after start to
	// capture the rest of the running config, which every generated config
	// keeps (user site blocks keep working). Default: Caddy's default admin
	// address (honours CADDY_ADMIN).
	CaddyAdmin string `json:"caddy_admin,omitempty"`
	// ACMETrustedRoots are PEM files of extra roots trusted for the ACME
	// CA's own HTTPS (a private or test CA); default: the system roots.
	ACMETrustedRoots []string `json:"acme_trusted_roots_pem_files,omitempty"`
	// ACMEDNSResolvers are the DNS resolvers (host:port) the dns-01
	// challenge uses for its SOA and propagation lookups (tests point it at
	// a local DNS server); default: the system's.
	ACMEDNSResolvers []string `json:"acme_dns_resolvers,omitempty"`
	// CloudflareAPIURL overrides the Cloudflare API base URL of the dns-01
	// provider (tests point it at a fake); default the real API.
	CloudflareAPIURL string `json:"cloudflare_api_url,omitempty"`
	// HealthInterval overrides the 10 s active health-check interval.
	HealthInterval caddy.Duration `json:"health_interval,omitempty"`
}

// Generated is what the control plane compiles from the store.
type Generated struct {
	// Version increases with every applied change.
	Version     int64     `json:"version"`
	CompiledAt  time.Time `json:"compiled_at"`
	HTTPListen  string    `json:"http_listen,omitempty"`
	HTTPSListen string    `json:"https_listen,omitempty"`
	HTTPS       bool      `json:"https_enabled,omitempty"`
	// RouterRaw is the gateway_router handler serving proxied traffic.
	RouterRaw json.RawMessage `json:"router,omitempty" caddy:"namespace=http.handlers inline_key=handler"`
	// Health lists every target to check.
	Health []health.Spec `json:"health,omitempty"`
	// Streams are the enabled TCP stream routes.
	Streams []streams.Route `json:"streams,omitempty"`
	// Counts of the compiled configuration (for /api/v1/config).
	Counts map[string]int `json:"counts,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision attaches the app to the process's control plane (created on the
// first load) and provisions the compiled router. It must not read the store
// or take the mutation lock: a mutation holds both while it calls caddy.Load.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.setDefaults()
	cp, err := controlPlaneFor(a, a.logger)
	if err != nil {
		return err
	}
	a.cp = cp
	if a.Generated == nil {
		return nil
	}
	if app, err := ctx.AppIfConfigured("tls"); err == nil {
		a.tlsApp, _ = app.(*caddytls.TLS)
	}
	if len(a.Generated.RouterRaw) > 0 {
		mod, err := ctx.LoadModule(a.Generated, "RouterRaw")
		if err != nil {
			return fmt.Errorf("loading gateway router: %w", err)
		}
		rt, ok := mod.(*router.Router)
		if !ok {
			return fmt.Errorf("gateway router is %T, want gateway_router", mod)
		}
		a.router = rt
	}
	if a.Generated.HTTPS {
		tc, err := httpsConfig(ctx)
		if err != nil {
			return fmt.Errorf("gateway HTTPS listener: %w", err)
		}
		a.tlsConfig = tc
	}
	return nil
}

func (a *Bootstrap) setDefaults() {
	if a.AdminListen == "" {
		a.AdminListen = "127.0.0.1:9080"
	}
	if a.Database == "" {
		a.Database = "sqlite"
	}
	if a.DSN == "" && a.Database == "sqlite" {
		a.DSN = "./data/gateway.db"
	}
	if a.HTTPListen == "" {
		a.HTTPListen = ":8080"
	}
	if a.HTTPSListen == "" {
		a.HTTPSListen = ":8443"
	}
}

// httpsConfig builds the TLS config of the gateway's HTTPS listener from the
// tls app: certificates are selected by SNI among the loaded and managed ones.
func httpsConfig(ctx caddy.Context) (*tls.Config, error) {
	pols := caddytls.ConnectionPolicies{new(caddytls.ConnectionPolicy)}
	if err := pols.Provision(ctx); err != nil {
		return nil, err
	}
	tc := pols.TLSConfig(ctx)
	tc.NextProtos = []string{"h2", "http/1.1"}
	return tc, nil
}

// Validate checks the bootstrap fields.
func (a *App) Validate() error {
	switch a.Database {
	case "sqlite", "postgres":
	default:
		return fmt.Errorf("gateway: database must be sqlite or postgres, got %q", a.Database)
	}
	if a.Database == "postgres" && a.DSN == "" {
		return fmt.Errorf("gateway: database postgres needs a DSN")
	}
	return nil
}

// Start makes this config the live one: listeners are bound (kept when
// unchanged), the router is swapped in atomically and health checks follow
// the new target set. Connections and in-flight requests are untouched.
func (a *App) Start() error {
	return a.cp.activate(a)
}

// Stop does nothing on a reload (the newer app has taken over); when the
// gateway app is unloaded for good, the control plane shuts down.
func (a *App) Stop() error {
	a.cp.deactivate(a)
	return nil
}

// Interface guards
var (
	_ caddy.App         = (*App)(nil)
	_ caddy.Provisioner = (*App)(nil)
	_ caddy.Validator   = (*App)(nil)
	_ http.Handler      = (*proxyHandler)(nil)
)
