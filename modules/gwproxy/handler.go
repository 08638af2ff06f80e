// Package gwproxy is the gateway's service proxy: the http.handlers.gateway_proxy
// handler forwards a routed request to one of a service's targets over
// net/http's transport. It takes the subset of Caddy's reverse_proxy
// configuration the gateway compiles (same field names: upstreams, the
// transport module, the selection policy module, retries, passive health,
// request header operations, stream_close_delay), so either handler can
// serve a service, and keeps reverse_proxy's behaviour for it: retries to
// other targets, passive health counted per target address for the
// process, the transport's three timeouts and TLS, X-Forwarded-* from
// trusted peers only, hop-by-hop headers, trailers, streamed responses,
// informational (1xx) responses, and WebSocket (any 101 upgrade) tunnels
// that outlive config reloads.
//
// Why not reverse_proxy itself: per request it sets about 20 replacer
// values (one per response header among them), builds a logger carrying
// the whole request for a debug line that is off and extra contexts; CPU profiles under wrk put the gateway's bare route at 0.82x
// Traefik with it, and a handler doing only the work below ahead of
// Traefik (bench/README.md, "Session 5: proxy path").
package gwproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the gateway_proxy HTTP handler.
type Handler struct {
	// Upstreams are the targets (dial addresses "host:port").
	Upstreams []*reverseproxy.Upstream `json:"upstreams,omitempty"`
	// TransportRaw is the round tripper (default: Caddy's http
	// transport); its dial, response header and read/write timeouts and
	// TLS settings apply as they do under reverse_proxy.
	TransportRaw json.RawMessage `json:"transport,omitempty" caddy:"namespace=http.reverse_proxy.transport inline_key=protocol"`
	// LoadBalancing chooses the target and how often to try another.
	LoadBalancing *LoadBalancing `json:"load_balancing,omitempty"`
	// HealthChecks: only passive checks (failed round trips count
	// against a target for fail_duration; max_fails of them take it out
	// of rotation).
	HealthChecks *HealthChecks `json:"health_checks,omitempty"`
	// Headers are request header operations applied to every attempt
	// after the target is chosen (placeholders such as
	// {http.reverse_proxy.upstream.hostport} see that target); setting
	// Host sets the upstream request's Host.
	Headers *headers.Handler `json:"headers,omitempty"`
	// StreamCloseDelay is how long upgraded connections (WebSockets)
	// stay open after the config that opened them is unloaded; 0 closes
	// them with the config.
	StreamCloseDelay caddy.Duration `json:"stream_close_delay,omitempty"`
	// GRPC: the targets are gRPC servers (not a reverse_proxy field):
	// the call's deadline is capped and enforced, and a call that ends
	// in a stream reset (its deadline passed, the client cancelled) is
	// not counted against the target.
	GRPC *GRPC `json:"grpc,omitempty"`

	// hostOnly: the request header operations are one Set of Host to
	// hostValue and nothing else (the one operation the gateway's
	// compiler emits: Host from {gateway.upstream_host}). attempt then
	// resolves the value into the request's Host directly, as
	// ApplyToRequest would, without putting Host into the outbound header
	// map and taking it out again (2% of the bare route's CPU under load).
	hostOnly  bool
	hostValue string

	transport http.RoundTripper
	selector  reverseproxy.Selector
	passive   *passive
	hosts     []*host // by index of Upstreams
	logger    *zap.Logger
	streams   *streams
}

// LoadBalancing is the selection policy and the retries.
type LoadBalancing struct {
	// SelectionPolicyRaw chooses among the available targets (default:
	// the first available one).
	SelectionPolicyRaw json.RawMessage `json:"selection_policy,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`
	// Retries is how many other targets a request may try after a
	// failed attempt: always after a failed connection, otherwise only
	// for GET requests.
	Retries int `json:"retries,omitempty"`
}

// HealthChecks holds the passive health settings.
type HealthChecks struct {
	Passive *PassiveHealthChecks `json:"passive,omitempty"`
}

// PassiveHealthChecks counts failed round trips against a target.
type PassiveHealthChecks struct {
	// FailDuration is how long a failure counts (0: failures are not
	// counted).
	FailDuration caddy.Duration `json:"fail_duration,omitempty"`
	// MaxFails is the number of counted failures that takes a target
	// out of rotation (default 1).
	MaxFails int `json:"max_fails,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_proxy",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision loads the transport and the selection policy and takes the
// targets' process-wide failure counters.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	var err error
	var mod any
	if h.TransportRaw != nil {
		mod, err = ctx.LoadModule(h, "TransportRaw")
	} else {
		mod, err = ctx.LoadModuleByID("http.reverse_proxy.transport.http", json.RawMessage("{}"))
	}
	if err != nil {
		return fmt.Errorf("loading the transport: %w", err)
	}
	rt, ok := mod.(http.RoundTripper)
	if !ok {
		return fmt.Errorf("transport %T is not an http.RoundTripper", mod)
	}
	h.transport = rt
	if h.LoadBalancing != nil && h.LoadBalancing.SelectionPolicyRaw != nil {
		mod, err := ctx.LoadModule(h.LoadBalancing, "SelectionPolicyRaw")
		if err != nil {
			return fmt.Errorf("loading the selection policy: %w", err)
		}
		if h.selector, ok = mod.(reverseproxy.Selector); !ok {
			return fmt.Errorf("selection policy %T is not a reverse_proxy selector", mod)
		}
	} else {
		h.selector = firstAvailable{}
	}
	if p := h.HealthChecks; p != nil && p.Passive != nil && p.Passive.FailDuration > 0 {
		h.passive = &passive{duration: time.Duration(p.Passive.FailDuration), max: int64(p.Passive.MaxFails)}
		if h.passive.max <= 0 {
			h.passive.max = 1
		}
	}
	if h.Headers != nil {
		if err := h.Headers.Provision(ctx); err != nil {
			return fmt.Errorf("provisioning request headers: %w", err)
		}
		if ops := h.Headers.Request; ops != nil && len(ops.Add) == 0 && len(ops.Delete) == 0 && len(ops.Replace) == 0 &&
			len(ops.Set) == 1 && len(ops.Set["Host"]) == 1 { // Provision canonicalized the names
			h.hostOnly, h.hostValue = true, ops.Set["Host"][0]
		}
	}
	h.hosts = make([]*host, len(h.Upstreams))
	for i, u := range h.Upstreams {
		h.hosts[i] = takeHost(u.Dial)
	}
	h.streams = &streams{conns: map[*tunnel]struct{}{}}
	return nil
}

// Validate checks the targets.
func (h *Handler) Validate() error {
	for _, u := range h.Upstreams {
		if u.Dial == "" {
			return errors.New("an upstream has no dial address")
		}
		// The address is the outbound URL's host: a network prefix
		// (unix/…, tcp/…) would be looked up as a host name.
		if _, _, err := net.SplitHostPort(u.Dial); err != nil || strings.Contains(u.Dial, "/") {
			return fmt.Errorf("upstream %s: gateway_proxy dials host:port addresses only (no unix sockets or network prefixes)", u.Dial)
		}
		if u.MaxRequests != 0 {
			return fmt.Errorf("upstream %s: max_requests is not supported by gateway_proxy", u.Dial)
		}
	}
	if h.LoadBalancing != nil && h.LoadBalancing.Retries < 0 {
		return errors.New("retries must not be negative")
	}
	return nil
}

// Cleanup releases the targets' failure counters and closes the
// upgraded connections this handler opened, after StreamCloseDelay.
func (h *Handler) Cleanup() error {
	// only the hosts taken: Caddy cleans up after a failed Provision too
	for i, hst := range h.hosts {
		if hst != nil {
			releaseHost(h.Upstreams[i].Dial)
		}
	}
	h.hosts = nil
	if h.streams != nil {
		h.streams.closeAfter(time.Duration(h.StreamCloseDelay))
	}
	return nil
}

// PassiveHealth reports the failures counted against the target at addr
// and whether they keep it out of rotation.
func (h *Handler) PassiveHealth(addr string) (fails int, down bool) {
	for i, u := range h.Upstreams {
		if u.Dial == addr {
			n := h.hosts[i].fails.Load()
			return int(n), h.passive != nil && n >= h.passive.max
		}
	}
	return 0, false
}

// firstAvailable is the selection without a policy module.
type firstAvailable struct{}

func (firstAvailable) Select(pool reverseproxy.UpstreamPool, _ *http.Request, _ http.ResponseWriter) *reverseproxy.Upstream {
	for _, u := range pool {
		if u.Available() {
			return u
		}
	}
	return nil
}

// streams are the upgraded connections a handler tunnels.
type streams struct {
	mu     sync.Mutex
	conns  map[*tunnel]struct{}
	closed bool
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
