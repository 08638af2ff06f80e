// Package certevents is the events handler
// events.handlers.gateway_certificates: it turns the certificate events
// Caddy's tls app emits through the events app (certmagic's cert_obtained,
// cert_failed and cached_managed_cert) into per-name events and hands them
// to the gateway app, which records them (the certificate's status, last
// error, issuer and validity in the store; package app/certs). The
// status the admin API shows is therefore what Caddy itself did, not a
// guess made from its cache. cert_obtaining is not subscribed to: an order
// in progress changes no certificate's status. The app
// gateway_certificate_events (app.go) subscribes the handler while a
// config is provisioned.
//
// Its tests are app/certs/events_test.go: real certificates issued
// by a test CA, the events seen through a running gateway.
package certevents

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/caddyserver/certmagic"

	"github.com/caddy-gateway/gateway/modules/gwtls"
)

func init() {
	caddy.RegisterModule(new(Handler))
}

// Events are the certmagic events the handler is subscribed to.
var Events = []string{"cert_obtained", "cert_failed", "cached_managed_cert"}

// Kind of an event.
const (
	Obtained = "obtained" // a certificate was issued and stored
	Failed   = "failed"   // the order failed (Error says why)
	Loaded   = "loaded"   // a managed certificate went into the cache (from storage: restart, other node)
)

// Event is what one certificate event says about one name.
type Event struct {
	Name    string
	Kind    string
	Renewal bool
	// Error is the CA's or the solver's message (Failed).
	Error string
	// Leaf is the certificate now stored or served for Name (Obtained,
	// Loaded); nil otherwise.
	Leaf *x509.Certificate
	At   time.Time
}

// Sink receives events: the gateway app implements it.
type Sink interface {
	CertificateEvent(Event)
}

// Handler is the events handler events.handlers.gateway_certificates. It
// has no fields: its sink is the config's gateway app.
type Handler struct {
	ctx caddy.Context
}

// CaddyModule returns the Caddy module information.
func (*Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "events.handlers.gateway_certificates",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision keeps the config's context: the gateway app and the
// certificate storage are looked up when an event comes (the events app is
// provisioned by the tls app, before the gateway app may be).
func (h *Handler) Provision(ctx caddy.Context) error {
	h.ctx = ctx
	return nil
}

// Handle translates a certificate event and hands it to the gateway app.
// It never aborts the event.
func (h *Handler) Handle(ctx context.Context, e caddy.Event) error {
	ev, err := h.translate(ctx, e)
	if err != nil || ev == nil {
		return err
	}
	app, err := h.ctx.AppIfConfigured("gateway")
	if err != nil {
		return fmt.Errorf("certificate event %s: %w", e.Name(), err)
	}
	sink, ok := app.(Sink)
	if !ok {
		return fmt.Errorf("certificate event %s: the gateway app (%T) takes no certificate events", e.Name(), app)
	}
	sink.CertificateEvent(*ev)
	return nil
}

func (h *Handler) translate(ctx context.Context, e caddy.Event) (*Event, error) {
	ev := &Event{At: e.Timestamp().UTC()}
	ev.Renewal, _ = e.Data["renewal"].(bool)
	switch e.Name() {
	case "cert_failed":
		ev.Kind = Failed
		ev.Name, _ = e.Data["identifier"].(string)
		switch v := e.Data["error"].(type) {
		case error:
			ev.Error = v.Error()
		case string:
			ev.Error = v
		}
		if ev.Error == "" {
			ev.Error = "the certificate could not be obtained (no reason given)"
		}
	case "cert_obtained":
		ev.Kind = Obtained
		ev.Name, _ = e.Data["identifier"].(string)
		path, _ := e.Data["certificate_path"].(string)
		leaf, err := h.storedLeaf(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("certificate event %s for %s: %w", e.Name(), ev.Name, err)
		}
		ev.Leaf = leaf
		// before a forced renewal caches it beside its predecessor
		gwtls.Issued(ev.Name, leaf)
	case "cached_managed_cert":
		ev.Kind = Loaded
		sans, _ := e.Data["sans"].([]string)
		if len(sans) == 0 {
			return nil, nil
		}
		ev.Name = sans[0]
		ev.Leaf = ServedLeaf(ev.Name)
		if ev.Leaf == nil {
			return nil, nil
		}
	default:
		return nil, nil
	}
	if ev.Name == "" {
		return nil, nil
	}
	ev.Name = strings.ToLower(ev.Name)
	return ev, nil
}

// storedLeaf reads the leaf of the PEM chain stored at key.
func (h *Handler) storedLeaf(ctx context.Context, key string) (*x509.Certificate, error) {
	if key == "" {
		return nil, errors.New("no certificate_path")
	}
	st := h.ctx.Storage()
	if st == nil {
		return nil, errors.New("no certificate storage")
	}
	b, err := st.Load(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", key, err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM certificate", key)
	}
	return x509.ParseCertificate(block.Bytes)
}

// ServedLeaf is the issued (untagged: not uploaded through the gateway)
// certificate of Caddy's cache for exactly name that was issued last
// (gwtls.Later, as the HTTPS listener chooses); nil when there is none.
func ServedLeaf(name string) (best *x509.Certificate) {
	defer func() {
		if recover() != nil { // no tls app has run yet: Caddy has no cache
			best = nil
		}
	}()
	var newest *certmagic.Certificate
	certs := caddytls.AllMatchingCertificates(name)
	for i := range certs {
		c := &certs[i]
		if len(c.Tags) > 0 || c.Leaf == nil {
			continue
		}
		for _, n := range c.Names {
			if strings.EqualFold(n, name) && (newest == nil || gwtls.Later(c, newest)) {
				newest = c
			}
		}
	}
	if newest == nil {
		return nil
	}
	return newest.Leaf
}

// Interface guards
var (
	_ caddy.Provisioner   = (*Handler)(nil)
	_ caddyevents.Handler = (*Handler)(nil)
)
