package certevents

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
)

func init() {
	caddy.RegisterModule(new(App))
}

// AppID is the App's module ID, the key of its (empty) object in a config's
// apps.
const AppID = "gateway_certificate_events"

// App subscribes the Handler to the tls app's certificate events when its
// config is provisioned. It has no fields and does nothing once started.
//
// Why an app of its own instead of a subscription in the events app's
// JSON: the events app adds its configured subscriptions in its Start,
// writing the map that Emit reads without a lock, and Caddy starts the
// config's apps one by one in no fixed order. When the tls app started
// first, certmagic's asynchronous obtain (a certificate added through the
// admin API) emitted its events while the events app was still
// subscribing: a data race the race detector reports, and for the Go
// runtime a fatal concurrent map read and write. Subscribing while the
// config is provisioned, before any app starts, is what the events app
// documents for subscriptions made from Go.
type App struct{}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  AppID,
		New: func() caddy.Module { return new(App) },
	}
}

// Provision subscribes a Handler of this config to the certificate events
// (Events) of the tls module in the config's events app.
func (*App) Provision(ctx caddy.Context) error {
	mod, err := ctx.App("events")
	if err != nil {
		return fmt.Errorf("loading the events app: %w", err)
	}
	events, ok := mod.(*caddyevents.App)
	if !ok {
		return fmt.Errorf("the events app is %T", mod)
	}
	h := new(Handler)
	if err := h.Provision(ctx); err != nil {
		return err
	}
	if err := events.Subscribe(&caddyevents.Subscription{
		Events:   append([]string(nil), Events...),
		Modules:  []caddy.ModuleID{"tls"},
		Handlers: []caddyevents.Handler{h},
	}); err != nil {
		return fmt.Errorf("subscribing to the certificate events: %w", err)
	}
	return nil
}

// Start implements caddy.App.
func (*App) Start() error { return nil }

// Stop implements caddy.App.
func (*App) Stop() error { return nil }

// Interface guards
var (
	_ caddy.App         = (*App)(nil)
	_ caddy.Provisioner = (*App)(nil)
)
