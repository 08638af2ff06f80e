// Package gwctx carries what the gateway knows about one proxied request from
// the router, through the plugin chain, to the proxy and the request record:
// the matched route and service, the authenticated consumer, the request id.
// One *Info per request, created by the router (or by the first gateway
// module that runs when a plugin is used on its own in a Caddyfile).
package gwctx

import (
	"context"
	"net/http"
	"time"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/records"
)

type ctxKey struct{}

// UpstreamHostKey is the replacer key the gateway's service proxies take the
// upstream Host header from. The router maps it per request (the client's
// Host for preserve_host routes, else the target's host:port); a plugin that
// sets it statically on the request's replacer (request-transform setting
// Host) overrides the router, since static values win over mappings.
const UpstreamHostKey = "gateway.upstream_host"

// Info is the per-request state shared by the gateway's modules.
type Info struct {
	Start time.Time

	// Set by the router.
	RouteID     int64
	RouteName   string
	ServiceID   int64
	MatchedPath string // the matched portion of the path (strip_path removes it)
	Matched     bool   // false: no route matched (404 from the proxy)

	// ClientIP is the client address after trusted_proxies are honoured.
	ClientIP string

	// Consumers is the credential table of the running config (nil when a
	// plugin runs outside the gateway router and has none of its own).
	Consumers *consumers.Table
	// Consumer is the authenticated consumer, set by an auth plugin.
	Consumer *consumers.Consumer
	// Anonymous is set with Consumer when it is an auth plugin's anonymous
	// consumer: no credentials were given. A later auth plugin of the
	// chain may still authenticate the request (they compose as "any of").
	Anonymous bool

	// RequestID is set by the request-id plugin.
	RequestID string
	// TraceID and SpanID are the request's trace and server span (hex),
	// set by the opentelemetry plugin; Tracer is that plugin, which the
	// service proxy asks for a client span per upstream attempt.
	TraceID, SpanID string
	Tracer          AttemptTracer
	// AnsweredBy is the type of the last plugin the router's chain entered
	// (set as each one starts), cleared when the request reaches the
	// service's proxy: once the chain has returned, the plugin that
	// answered the request itself (401, 429, a cache hit), or "".
	AnsweredBy string
	// Target is the upstream "host:port" that served the request.
	Target string
	// Status is set when the gateway answered the request itself.
	Status int
	// Upstream is set by the service proxy just before it writes the
	// target's response (GRPCWriter passes that one on unchanged).
	Upstream bool
	// GRPC marks a gRPC call; GRPCStatus is the grpc-status the client
	// got (-1: none seen), for the request record.
	GRPC       bool
	GRPCStatus int

	// Uncacheable is set by a plugin that fills the response in with
	// values of this very request the cache key does not hold (a
	// response-transform value with placeholders, applied inside
	// proxy-cache): proxy-cache does not store that response, which
	// would answer other clients' requests with this one's values.
	// proxy-cache clears it before the plugins after it run.
	Uncacheable bool

	// HTTPSPort is the port of the gateway's HTTPS listener (redirect
	// to_https); 0 when unknown (plugins then assume 443).
	HTTPSPort int

	// WAF is set by the waf plugin when a rule matched (the record's waf).
	WAF *records.WAF

	// Sinks receive the completed request record (http-log adds itself).
	// The gateway's proxy server builds the record once the response is
	// done and hands it to every sink; a plugin used on its own in a
	// Caddyfile, where no gateway server builds records, builds its own.
	Sinks []records.Sink
	// RecordBuilt is set when a gateway server will build the record.
	RecordBuilt bool
}

// AttemptTracer traces the service proxy's upstream attempts.
type AttemptTracer interface {
	// StartAttempt starts the span of one attempt to target (host:port),
	// with out as the request to send (it may add headers to out.Header,
	// a map of its own), and returns what ends it: with the target's
	// status, or the error when there was no response.
	StartAttempt(out *http.Request, target string) (end func(status int, err error))
}

// From returns the request's Info, or nil.
func From(r *http.Request) *Info {
	info, _ := r.Context().Value(ctxKey{}).(*Info)
	return info
}

// With returns r carrying info.
func With(r *http.Request, info *Info) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), ctxKey{}, info))
}

// Ensure returns the request's Info, attaching a fresh one when there is none
// (a plugin used on its own, outside the gateway router).
func Ensure(r *http.Request) (*Info, *http.Request) {
	if info := From(r); info != nil {
		return info, r
	}
	info := &Info{Start: time.Now()}
	return info, With(r, info)
}
