// Package app is the `gateway` Caddy app: it attaches each loaded
// config to the process's control plane (package controlplane), which owns
// everything that must survive reloads, and gives that control plane its
// features explicitly (features.go): the admin API's endpoint sets and its
// authentication. Tests of the app's lifecycle (reloads, restarts, rollback)
// are in app/tests.
package app

import (
	"crypto/tls"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/internal/configref"
	"github.com/caddy-gateway/gateway/internal/health"
	"github.com/caddy-gateway/gateway/modules/certevents"
	"github.com/caddy-gateway/gateway/modules/gwtls"
	"github.com/caddy-gateway/gateway/modules/plugins/ratelimit/shared"
	"github.com/caddy-gateway/gateway/modules/router"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the `gateway` Caddy app. Its bootstrap fields come from the
// Caddyfile's `gateway` global option (or JSON); Generated is written by the
// control plane's config compiler and absent from hand-written configs.
type App struct {
	controlplane.Bootstrap

	// Generated is the compiled gateway configuration.
	Generated *controlplane.Generated `json:"generated,omitempty"`

	cp     *controlplane.ControlPlane
	inst   *controlplane.Instance
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision provisions the compiled router and attaches the app to the
// process's control plane. A hand-written config (no Generated part)
// attaches at Start instead, where the control plane is created on the
// first load: provisioning alone (`caddy validate`) opens no store. It must
// not read the store or take the mutation lock: a mutation holds both while
// it calls caddy.Load.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.SetDefaults()
	a.inst = &controlplane.Instance{Bootstrap: a.Bootstrap, Generated: a.Generated}
	if a.Generated == nil {
		return nil
	}
	if err := a.attach(); err != nil {
		return err
	}
	if app, err := ctx.AppIfConfigured("tls"); err == nil {
		a.inst.TLSApp, _ = app.(*caddytls.TLS)
	}
	if ref := a.Generated.HealthRef; ref != "" {
		specs, err := configref.Get[[]health.Spec](ref)
		if err != nil {
			return fmt.Errorf("gateway health_ref: %w", err)
		}
		a.Generated.Health = specs
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
		a.inst.Router = rt
	}
	if a.Generated.HTTPS {
		tc, err := httpsConfig(ctx)
		if err != nil {
			return fmt.Errorf("gateway HTTPS listener: %w", err)
		}
		a.inst.TLSConfig = tc
	}
	return nil
}

// httpsConfig builds the TLS config of the gateway's HTTPS listener from the
// tls app: certificates are selected by SNI among the loaded and managed ones.
func httpsConfig(ctx caddy.Context) (*tls.Config, error) {
	pols := caddytls.ConnectionPolicies{new(caddytls.ConnectionPolicy)}
	if err := pols.Provision(ctx); err != nil {
		return nil, err
	}
	// The newest cached certificate of a name is served (a forced renewal
	// at once), unless on-demand policies need certmagic to see every
	// handshake (they renew during handshakes).
	if app, err := ctx.App("tls"); err == nil && !onDemand(app.(*caddytls.TLS)) {
		pc := pols[0].TLSConfig
		pc.GetCertificate = gwtls.Newest(pc.GetCertificate, caddytls.AllMatchingCertificates)
	}
	tc := pols.TLSConfig(ctx)
	tc.NextProtos = []string{"h2", "http/1.1"}
	return tc, nil
}

func onDemand(t *caddytls.TLS) bool {
	if t.Automation == nil {
		return false
	}
	for _, ap := range t.Automation.Policies {
		if ap.OnDemand {
			return true
		}
	}
	return false
}

// Validate checks the bootstrap fields.
func (a *App) Validate() error {
	switch a.Database {
	case "sqlite", "postgres":
	default:
		return fmt.Errorf("gateway: database must be sqlite or postgres, got %q", a.Database)
	}
	if a.Database == "postgres" && a.StoreDSN() == "" {
		return fmt.Errorf("gateway: database postgres needs a DSN")
	}
	return a.CheckRedis()
}

// Start makes this config the live one: listeners are bound (kept when
// unchanged), the router is swapped in atomically and health checks follow
// the new target set. Connections and in-flight requests are untouched.
func (a *App) Start() error {
	if err := a.attach(); err != nil {
		return err
	}
	return a.cp.Activate(a.inst)
}

// attach finds the process's control plane, creating it on the first load.
func (a *App) attach() error {
	if a.cp != nil {
		return nil
	}
	cp, err := controlplane.For(a.Bootstrap, a.logger, withFeatures)
	if err != nil {
		return err
	}
	// The rate limits' Redis connection is the process's (kept across
	// reloads while the URL is unchanged).
	if err := shared.ConfigureRedis(a.RedisURL()); err != nil {
		return fmt.Errorf("gateway redis: %w", err)
	}
	a.cp = cp
	return nil
}

// Stop does nothing on a reload (the newer app has taken over); when the
// gateway app is unloaded for good, the control plane shuts down.
func (a *App) Stop() error {
	if a.cp != nil {
		a.cp.Deactivate(a.inst)
	}
	return nil
}

// Cleanup discards the control plane when this app created it and its
// config never started.
func (a *App) Cleanup() error {
	if a.cp != nil {
		a.cp.Discard()
	}
	return nil
}

// HealthRegistry is the process's target health (the control plane's, so
// it survives reloads): the gateway selection policy reaches it with
// ctx.App("gateway") while the app provisions its router.
func (a *App) HealthRegistry() *health.Registry {
	if a.cp == nil {
		return nil
	}
	return a.cp.Health()
}

// CertificateEvent implements certevents.Sink: Caddy's certificate events
// are recorded by the certificates feature of the control plane.
func (a *App) CertificateEvent(ev certevents.Event) {
	if a.cp != nil {
		certs.Record(a.cp, ev)
	}
}

// Interface guards
var (
	_ certevents.Sink    = (*App)(nil)
	_ caddy.App          = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ health.Owner       = (*App)(nil)
)
