// Package opentelemetry holds the gateway's opentelemetry plugin type (an
// extension of the contract's plugin types): a server span per proxied
// request, a client span per upstream attempt (gwctx.AttemptTracer, which
// the service proxy calls), trace context propagated to the target, and
// the spans exported over OTLP/HTTP off the request path by a batching
// exporter per destination that outlives config reloads (export.go).
package opentelemetry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

func init() {
	plugins.Register(plugins.Type{Name: "opentelemetry", Ordering: 50, Outer: true, Extension: true,
		Doc: "Traces proxied requests with OpenTelemetry: a server span per request named after the route (GET billing) and a client span per upstream attempt (retries are attempts of their own), exported in batches over OTLP/HTTP (protobuf) to a collector. " +
			"The trace context of the request (W3C traceparent and tracestate; b3 when listed in propagation) is continued when it is sampled, and the target receives a traceparent whose parent is the client span of its attempt. " +
			"Requests a plugin answers itself (401, 403, 429, a cache hit …) carry the attribute gateway.plugin with that plugin's type. " +
			"Export never holds up a request: spans wait in a queue (queue_size) per collector and go out in batches of up to 512 at least every second; spans that find the queue full, and batches the collector does not take within 10 s (no retries), are dropped and counted (gateway_otel_spans_dropped_total on /metrics). " +
			"Plugins with the same endpoint and headers share one exporter, which a config change keeps with its queue. The default ordering places it before every other plugin, so that its span covers them. Request records carry the trace_id and span_id of the server span.",
		New: func() plugins.Plugin { return new(OpenTelemetry) }})
	caddy.OnExit(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, drainTimeout)
		defer cancel()
		shutdownAll(ctx)
	})
}

// OpenTelemetry is the opentelemetry plugin.
type OpenTelemetry struct {
	Endpoint           string            `json:"endpoint" schema:"required,url,secret" doc:"OTLP/HTTP traces URL of the collector, e.g. http://collector:4318/v1/traces (protobuf is posted to it as it is). Its credentials (user:password@) and query values are secrets, as http-log's endpoint. Never the gateway admin API or Caddy's admin endpoint (400; refused again when the name is resolved)."`
	Headers            map[string]string `json:"headers" schema:"secret,keys=header_name,header_value,maxItems=100" doc:"Request headers sent with every export (e.g. Authorization, an API key). The values are write-only secrets: viewers and exports without secrets see <redacted>."`
	SamplingRatio      float64           `json:"sampling_ratio" schema:"min=0,max=1" doc:"Share of new traces that are sampled (0..1, by trace id). Parent based: a request whose incoming trace context is sampled is traced whatever the ratio, one whose context is not sampled is not."`
	ServiceName        string            `json:"service_name" schema:"name,minLength=1,maxLength=255" doc:"service.name of the spans' resource."`
	ResourceAttributes map[string]string `json:"resource_attributes" schema:"keys=name,maxLength=1024,maxItems=64" doc:"More attributes of the spans' resource (deployment.environment, service.version …), as strings."`
	QueueSize          int               `json:"queue_size" schema:"min=1,max=100000" doc:"Most ended spans waiting for export per collector (plugins with the same endpoint, headers and queue_size share one queue); spans beyond it are dropped and counted."`
	Propagation        []string          `json:"propagation" schema:"minItems=1,maxItems=2,enum=w3c|b3" doc:"Trace context formats read from requests and written to the target's: w3c (traceparent, tracestate) and b3 (read as single or multiple headers, written as multiple X-B3-* headers). A request carrying several is continued from the one listed last."`

	plugins.Instance

	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	key        string // of the shared exporter
}

// CaddyModule returns the Caddy module information.
func (*OpenTelemetry) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[OpenTelemetry]("opentelemetry")
}

// Provision implements caddy.Provisioner: it acquires the destination's
// shared exporter and builds the instance's tracer (its sampler and
// resource are the instance's own).
func (o *OpenTelemetry) Provision(caddy.Context) error {
	if err := schema.Check(o); err != nil {
		return err
	}
	b, key, err := acquireExporter(o.Endpoint, o.Headers, o.QueueSize)
	if err != nil {
		return err
	}
	o.key = key
	attrs := make([]attribute.KeyValue, 0, len(o.ResourceAttributes)+1)
	for k, v := range o.ResourceAttributes {
		attrs = append(attrs, attribute.String(k, v))
	}
	attrs = append(attrs, attribute.String("service.name", o.ServiceName))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SamplingRatio))),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSpanProcessor(b),
	)
	o.tracer = tp.Tracer("github.com/caddy-gateway/gateway/modules/plugins/opentelemetry")
	props := make([]propagation.TextMapPropagator, 0, 2)
	for _, p := range o.Propagation {
		switch p {
		case "w3c":
			props = append(props, propagation.TraceContext{})
		case "b3":
			props = append(props, b3.New(b3.WithInjectEncoding(b3.B3MultipleHeader)))
		}
	}
	o.propagator = propagation.NewCompositeTextMapPropagator(props...)
	return nil
}

// Validate implements caddy.Validator and schema.Validator.
func (o *OpenTelemetry) Validate() error {
	if err := plugins.CheckCollectorURL("endpoint", o.Endpoint); err != nil {
		return err
	}
	if _, ok := o.Headers[""]; ok {
		return schema.Errorf("headers", "keys must not be empty")
	}
	if _, ok := o.ResourceAttributes[""]; ok {
		return schema.Errorf("resource_attributes", "keys must not be empty")
	}
	for i, p := range o.Propagation {
		if slices.Contains(o.Propagation[:i], p) {
			return schema.Errorf("propagation", "lists %s twice", p)
		}
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler: the server span of
// the request, around the rest of the chain; the service proxy starts the
// client spans (StartAttempt).
func (o *OpenTelemetry) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info, r := gwctx.Ensure(r)
	if info.Tracer != nil { // an outer opentelemetry plugin traces it already
		return next.ServeHTTP(w, r)
	}
	name := r.Method
	if info.RouteName != "" {
		name += " " + info.RouteName
	}
	ctx := o.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(info.Start))
	sc := span.SpanContext()
	info.TraceID, info.SpanID = sc.TraceID().String(), sc.SpanID().String()
	info.Tracer = o
	recording := span.IsRecording()
	if recording {
		path := r.URL.Path
		if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
			path = orig.URL.Path // before strip_path
		}
		span.SetAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", path),
			attribute.String("url.scheme", scheme(r)),
			attribute.String("client.address", gwctx.ClientIP(r)),
			attribute.String("user_agent.original", r.UserAgent()),
		)
		setAddress(span, r.Host)
		if info.Matched {
			span.SetAttributes(
				attribute.String("http.route", info.RouteName),
				attribute.Int64("gateway.route.id", info.RouteID),
			)
		}
	}
	rw, ok := w.(*gwctx.RecordingWriter)
	if !ok {
		rw = gwctx.NewRecordingWriter(w)
		w = rw
	}
	err := next.ServeHTTP(w, r.WithContext(ctx))
	if !recording {
		span.End()
		return err
	}
	status := rw.Status
	if status == 0 {
		status = http.StatusOK
		if err != nil {
			status = http.StatusInternalServerError
			var he caddyhttp.HandlerError
			if errors.As(err, &he) && he.StatusCode != 0 {
				status = he.StatusCode
			}
		}
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if info.Matched {
		span.SetAttributes(attribute.Int64("gateway.service.id", info.ServiceID))
	}
	if info.Consumer != nil {
		span.SetAttributes(attribute.String("gateway.consumer.username", info.Consumer.Username))
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		if t, ok := repl.GetString("http.reverse_proxy.upstream.hostport"); ok && t != "" {
			span.SetAttributes(attribute.String("gateway.target", t))
		}
	}
	if info.AnsweredBy != "" {
		span.SetAttributes(attribute.String("gateway.plugin", info.AnsweredBy))
		span.AddEvent("answered by plugin", trace.WithAttributes(attribute.String("gateway.plugin", info.AnsweredBy)))
	}
	// Server spans: 5xx are errors, 4xx are the client's (semantic
	// conventions for HTTP spans).
	if status >= 500 {
		span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
	return err
}

// StartAttempt implements gwctx.AttemptTracer: the client span of one
// upstream attempt, a child of the request's server span, whose context
// goes to the target in out's headers.
func (o *OpenTelemetry) StartAttempt(out *http.Request, target string) func(status int, err error) {
	ctx, span := o.tracer.Start(out.Context(), out.Method, trace.WithSpanKind(trace.SpanKindClient))
	o.propagator.Inject(ctx, propagation.HeaderCarrier(out.Header))
	if !span.IsRecording() {
		return func(int, error) { span.End() }
	}
	span.SetAttributes(
		attribute.String("http.request.method", out.Method),
		attribute.String("gateway.target", target),
		attribute.String("url.path", out.URL.Path),
	)
	setAddress(span, target)
	return func(status int, err error) {
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetAttributes(attribute.String("error.type", errorType(err)))
			span.SetStatus(codes.Error, err.Error())
		default:
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			// Client spans: 4xx and 5xx are errors.
			if status >= 400 {
				span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
		span.End()
	}
}

// Cleanup implements caddy.CleanerUpper: the shared exporter keeps running
// while a newer config uses it, and sends what it has queued and stops
// otherwise.
func (o *OpenTelemetry) Cleanup() error {
	releaseExporter(o.key)
	o.key = ""
	return nil
}

// SetDefaults implements schema.Defaulter.
func (o *OpenTelemetry) SetDefaults() {
	o.Endpoint = ""
	o.Headers = map[string]string{}
	o.SamplingRatio = 1
	o.ServiceName = "caddy-gateway"
	o.ResourceAttributes = map[string]string{}
	o.Propagation = []string{"w3c"}
	o.QueueSize = 2048
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler with the plugins'
// shared syntax (plugins.UnmarshalCaddyfile):
//
//	gateway_opentelemetry [<endpoint>] {
//	    endpoint <url>
//	    headers <name> <value>
//	    sampling_ratio <0..1>
//	    service_name <name>
//	    resource_attributes <key> <value>
//	    propagation w3c|b3...
//	    queue_size <n>
//	}
//
// header is accepted for headers.
func (o *OpenTelemetry) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugins.UnmarshalCaddyfile(d, o, plugins.Syntax{Args: []string{"endpoint"}, Aliases: map[string]string{"header": "headers"}})
}

// setAddress sets server.address and server.port from a host[:port].
func setAddress(span trace.Span, hostport string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		span.SetAttributes(attribute.String("server.address", hostport))
		return
	}
	span.SetAttributes(attribute.String("server.address", host))
	if n, err := strconv.Atoi(port); err == nil {
		span.SetAttributes(attribute.Int("server.port", n))
	}
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// errorType names a failed attempt's error for error.type: a timeout,
// a refused or failed connection, or the error's Go type.
func errorType(err error) string {
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return "timeout"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return "connection_failed"
}

// Interface guards
var (
	_ plugins.Plugin        = (*OpenTelemetry)(nil)
	_ caddy.CleanerUpper    = (*OpenTelemetry)(nil)
	_ caddyfile.Unmarshaler = (*OpenTelemetry)(nil)
	_ gwctx.AttemptTracer   = (*OpenTelemetry)(nil)
)
