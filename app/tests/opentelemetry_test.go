package tests

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/poll"
	"github.com/caddy-gateway/gateway/modules/plugins/opentelemetry"
)

// otlpSpan is one span an OTLP/HTTP receiver decoded.
type otlpSpan struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      tracepb.Span_SpanKind
	Status                    tracepb.Status_StatusCode
	Attrs, Resource           map[string]string
	Events                    []string
}

// otlpReceiver is a real OTLP/HTTP traces receiver: it decodes the
// protobuf export requests with the OpenTelemetry protocol's own types.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
	posts int
	// arrived counts export requests as they arrive; hold, when set, is
	// waited on before taking one (a collector that hangs), delay slept.
	arrived atomic.Int64
	hold    chan struct{}
	delay   time.Duration
}

func newReceiver(t *testing.T) *otlpReceiver {
	c := &otlpReceiver{}
	c.srv = testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		c.arrived.Add(1)
		time.Sleep(c.delay)
		if c.hold != nil {
			select {
			case <-c.hold:
			case <-r.Context().Done():
				return
			}
		}
		if r.Method != "POST" || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("export: %s %s %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("export body: %v", err)
			w.WriteHeader(400)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.posts++
		for _, rs := range req.GetResourceSpans() {
			res := attrMap(rs.GetResource().GetAttributes())
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					sp := otlpSpan{TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
						ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
						Status: s.GetStatus().GetCode(), Attrs: attrMap(s.GetAttributes()), Resource: res}
					for _, e := range s.GetEvents() {
						sp.Events = append(sp.Events, e.GetName())
					}
					c.spans = append(c.spans, sp)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	})
	return c
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.Value.(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

func (c *otlpReceiver) endpoint() string { return c.srv.URL + "/v1/traces" }

// trace returns the spans received of a trace.
func (c *otlpReceiver) trace(id string) []otlpSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []otlpSpan
	for _, s := range c.spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}

func (c *otlpReceiver) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.spans)
}

// waitTrace waits for n spans of the trace.
func (c *otlpReceiver) waitTrace(t *testing.T, id string, n int) []otlpSpan {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%d spans of trace %s", n, id), func() bool { return len(c.trace(id)) >= n })
	return c.trace(id)
}

func byKind(spans []otlpSpan, k tracepb.Span_SpanKind) []otlpSpan {
	var out []otlpSpan
	for _, s := range spans {
		if s.Kind == k {
			out = append(out, s)
		}
	}
	return out
}

// traceparent parses a W3C traceparent: trace id, parent id, flags.
func traceparent(t *testing.T, v string) (string, string, string) {
	t.Helper()
	p := strings.Split(v, "-")
	if len(p) != 4 || p[0] != "00" || len(p[1]) != 32 || len(p[2]) != 16 {
		t.Fatalf("traceparent %q", v)
	}
	return p[1], p[2], p[3]
}

func otelPlugin(g *testgw.Gateway, config map[string]any) int64 {
	g.T.Helper()
	return testgw.ID(g.Must("POST", "/api/v1/plugins", map[string]any{"type": "opentelemetry", "scope": "global", "config": config}))
}

const (
	clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientParent = "00f067aa0ba902b7"
)

// TestOpenTelemetrySpans: a sampled incoming trace is continued: the
// server span (named after the route, its attributes) is the client's
// span's child, each upstream attempt has a client span (a retry is a
// second one), the target gets a traceparent whose parent is its
// attempt's span and the tracestate, a plugin answering itself is named
// on the span, and the request record carries the ids.
func TestOpenTelemetrySpans(t *testing.T) {
	g := testgw.Start(t, nil)
	rc := newReceiver(t)
	up := testgw.Echo(t, "up")
	sid := g.Service("billing-svc", testgw.Addr(up))
	rid := g.Route("billing", sid, map[string]any{"paths": []string{"/billing"}, "methods": []string{"GET"}})
	keyed := g.Route("keyed", sid, testgw.Paths("/keyed"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": keyed})
	g.Consumer("alice", map[string]any{"type": "key-auth", "key": "k-alice"})
	otelPlugin(g, map[string]any{"endpoint": rc.endpoint(), "service_name": "edge", "headers": map[string]any{"X-Api-Key": "s3cret"},
		"resource_attributes": map[string]any{"deployment.environment": "test"}})

	a := g.Proxy(t, "GET", "/billing/x", nil, "traceparent", "00-"+clientTrace+"-"+clientParent+"-01", "tracestate", "vendor=v1",
		"User-Agent", "otel-test/1")
	if a.Status != 200 {
		t.Fatalf("GET /billing/x: %d %s", a.Status, a.Body)
	}
	echoed := testgw.DecodeEcho(t, a.Body)
	tid, parent, flags := traceparent(t, echoed.Headers.Get("Traceparent"))
	if tid != clientTrace || flags != "01" || parent == clientParent {
		t.Fatalf("the target got traceparent %q", echoed.Headers.Get("Traceparent"))
	}
	if ts := echoed.Headers.Get("Tracestate"); ts != "vendor=v1" {
		t.Fatalf("the target got tracestate %q", ts)
	}

	spans := rc.waitTrace(t, clientTrace, 2)
	servers, clients := byKind(spans, tracepb.Span_SPAN_KIND_SERVER), byKind(spans, tracepb.Span_SPAN_KIND_CLIENT)
	if len(servers) != 1 || len(clients) != 1 {
		t.Fatalf("spans: %+v", spans)
	}
	srv, cl := servers[0], clients[0]
	if srv.Name != "GET billing" || srv.ParentID != clientParent {
		t.Fatalf("server span: %+v", srv)
	}
	for k, v := range map[string]string{"http.request.method": "GET", "url.path": "/billing/x", "http.route": "billing",
		"server.address": "127.0.0.1", "server.port": g.ProxyAddr[strings.LastIndexByte(g.ProxyAddr, ':')+1:], "client.address": "127.0.0.1", "http.response.status_code": "200",
		"user_agent.original": "otel-test/1", "gateway.route.id": fmt.Sprint(rid), "gateway.service.id": fmt.Sprint(sid),
		"gateway.target": testgw.Addr(up)} {
		if srv.Attrs[k] != v {
			t.Errorf("server span %s = %q, want %q", k, srv.Attrs[k], v)
		}
	}
	if srv.Resource["service.name"] != "edge" || srv.Resource["deployment.environment"] != "test" {
		t.Errorf("resource: %v", srv.Resource)
	}
	if cl.ParentID != srv.SpanID || cl.SpanID != parent || cl.Attrs["gateway.target"] != testgw.Addr(up) ||
		cl.Attrs["http.response.status_code"] != "200" || cl.Attrs["server.address"] != "127.0.0.1" {
		t.Fatalf("client span %+v (server span %s, the target's parent %s)", cl, srv.SpanID, parent)
	}

	// The request record carries the trace and the server span.
	var recs []map[string]any
	g.JSON("GET", "/api/v1/requests?limit=1", nil, &recs)
	if len(recs) != 1 || recs[0]["trace_id"] != clientTrace || recs[0]["span_id"] != srv.SpanID {
		t.Fatalf("record: %v", recs)
	}

	// A plugin answering itself is named on the server span; no attempt.
	g.WantGet("", "/keyed", 401)
	g.JSON("GET", "/api/v1/requests?limit=1", nil, &recs)
	denied := rc.waitTrace(t, recs[0]["trace_id"].(string), 1)
	if len(denied) != 1 || denied[0].Attrs["gateway.plugin"] != "key-auth" || denied[0].Attrs["http.response.status_code"] != "401" ||
		denied[0].Status == tracepb.Status_STATUS_CODE_ERROR || len(denied[0].Events) != 1 {
		t.Fatalf("denied request's spans: %+v", denied)
	}
	// An authenticated consumer is named.
	if a := g.Proxy(t, "GET", "/keyed", nil, "apikey", "k-alice"); a.Status != 200 {
		t.Fatalf("keyed: %d", a.Status)
	}
	g.JSON("GET", "/api/v1/requests?limit=1", nil, &recs)
	authed := byKind(rc.waitTrace(t, recs[0]["trace_id"].(string), 2), tracepb.Span_SPAN_KIND_SERVER)
	if len(authed) != 1 || authed[0].Attrs["gateway.consumer.username"] != "alice" || authed[0].Attrs["gateway.plugin"] != "" {
		t.Fatalf("authenticated request's server span: %+v", authed)
	}

	// Retries are attempts of their own: with a refusing target beside
	// the live one, round robin tries it first in one of two requests.
	retry := g.Service("retry", testgw.RefusingAddr(t), testgw.Addr(up))
	g.Route("retry", retry, testgw.Paths("/retry"))
	var twoAttempts []otlpSpan
	for i := 0; i < 2; i++ {
		g.WantGet("", "/retry", 200)
		g.JSON("GET", "/api/v1/requests?limit=1", nil, &recs)
		tr := recs[0]["trace_id"].(string)
		poll.Until(t, "the server span", func() bool { return len(byKind(rc.trace(tr), tracepb.Span_SPAN_KIND_SERVER)) == 1 })
		if c := byKind(rc.trace(tr), tracepb.Span_SPAN_KIND_CLIENT); len(c) == 2 {
			twoAttempts = c
		}
	}
	if len(twoAttempts) != 2 {
		t.Fatal("no request with two attempts")
	}
	failed, ok := twoAttempts[0], twoAttempts[1]
	if failed.Status != tracepb.Status_STATUS_CODE_ERROR {
		failed, ok = ok, failed
	}
	if failed.Status != tracepb.Status_STATUS_CODE_ERROR || failed.Attrs["http.response.status_code"] != "" ||
		ok.Attrs["http.response.status_code"] != "200" || ok.Attrs["gateway.target"] != testgw.Addr(up) {
		t.Fatalf("attempts: %+v", twoAttempts)
	}

	// The headers are secrets: not in Caddy's config, redacted for
	// viewers and in the default export.
	if cfg := testgw.CaddyConfig(t, g.CaddyAdmin, "/config/"); strings.Contains(cfg, "s3cret") {
		t.Fatal("Caddy's config holds the header value")
	}
	tok := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	g.Header.Set("Authorization", "Bearer "+tok)
	g.Must("POST", "/api/v1/users", map[string]any{"email": "viewer@example.com", "role": "viewer", "password": "viewer-pass"})
	if _, export := g.Do("GET", "/api/v1/export", nil); strings.Contains(string(export), "s3cret") {
		t.Fatal("the default export holds the header value")
	}
	viewer := g.Login("viewer@example.com", "viewer-pass")
	g.Header.Del("Authorization")
	g.Header.Set("Cookie", viewer.Get("Cookie"))
	var ps []map[string]any
	g.JSON("GET", "/api/v1/plugins", nil, &ps)
	for _, p := range ps {
		if p["type"] == "opentelemetry" {
			if h := p["config"].(map[string]any)["headers"].(map[string]any); h["X-Api-Key"] != "<redacted>" {
				t.Fatalf("a viewer sees headers %v", h)
			}
		}
	}
}

// TestOpenTelemetrySampling: the ratio decides new traces only; an
// incoming context's sampled flag decides the rest (parent based), and
// the target gets the context whether sampled or not.
func TestOpenTelemetrySampling(t *testing.T) {
	g := testgw.Start(t, nil)
	rc := newReceiver(t)
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("r", sid, nil)
	pid := otelPlugin(g, map[string]any{"endpoint": rc.endpoint(), "sampling_ratio": 0})

	send := func(hdr ...string) (tid, flags string) {
		t.Helper()
		a := g.Proxy(t, "GET", "/x", nil, hdr...)
		if a.Status != 200 {
			t.Fatalf("status %d", a.Status)
		}
		tid, _, flags = traceparent(t, testgw.DecodeEcho(t, a.Body).Headers.Get("Traceparent"))
		return tid, flags
	}
	// Ratio 0: a new trace is not sampled, yet propagated.
	newTrace, flags := send()
	if flags != "00" {
		t.Fatalf("ratio 0, new trace: flags %s", flags)
	}
	// Ratio 0 with a sampled parent: traced.
	const sampled = "0af7651916cd43dd8448eb211c80319c"
	if tid, flags := send("traceparent", "00-"+sampled+"-b7ad6b7169203331-01"); tid != sampled || flags != "01" {
		t.Fatalf("sampled parent: %s %s", tid, flags)
	}
	rc.waitTrace(t, sampled, 2)

	// Ratio 1 with an unsampled parent: not traced, the trace id goes on.
	g.Must("PUT", fmt.Sprintf("/api/v1/plugins/%d", pid), map[string]any{"type": "opentelemetry", "scope": "global",
		"config": map[string]any{"endpoint": rc.endpoint(), "sampling_ratio": 1}})
	const unsampled = "1af7651916cd43dd8448eb211c80319c"
	if tid, flags := send("traceparent", "00-"+unsampled+"-b7ad6b7169203331-00"); tid != unsampled || flags != "00" {
		t.Fatalf("unsampled parent: %s %s", tid, flags)
	}
	// Ratio 1, new trace: sampled (its spans arrive after the others').
	fresh, flags := send()
	if flags != "01" {
		t.Fatalf("ratio 1, new trace: flags %s", flags)
	}
	rc.waitTrace(t, fresh, 2)
	if n := len(rc.trace(newTrace)) + len(rc.trace(unsampled)); n != 0 {
		t.Fatalf("%d spans of unsampled traces were exported", n)
	}
}

// TestOpenTelemetryB3: with b3 listed, a b3 context is continued and the
// target gets X-B3-* beside traceparent.
func TestOpenTelemetryB3(t *testing.T) {
	g := testgw.Start(t, nil)
	rc := newReceiver(t)
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("r", sid, nil)
	otelPlugin(g, map[string]any{"endpoint": rc.endpoint(), "propagation": []string{"w3c", "b3"}})

	const tid = "80f198ee56343ba864fe8b2a57d3eff7"
	a := g.Proxy(t, "GET", "/b3", nil, "b3", tid+"-e457b5a2e4d86bd1-1")
	h := testgw.DecodeEcho(t, a.Body).Headers
	if h.Get("X-B3-Traceid") != tid || h.Get("X-B3-Sampled") != "1" || len(h.Get("X-B3-Spanid")) != 16 {
		t.Fatalf("b3 headers to the target: %v", h)
	}
	if got, parent, _ := traceparent(t, h.Get("Traceparent")); got != tid || parent != h.Get("X-B3-Spanid") {
		t.Fatalf("traceparent %q beside b3 %v", h.Get("Traceparent"), h)
	}
	srv := byKind(rc.waitTrace(t, tid, 2), tracepb.Span_SPAN_KIND_SERVER)
	if len(srv) != 1 || srv[0].ParentID != "e457b5a2e4d86bd1" {
		t.Fatalf("server span: %+v", srv)
	}

	// Invalid values are refused, naming the field.
	for _, c := range []struct {
		config map[string]any
		field  string
	}{
		{map[string]any{"endpoint": rc.endpoint(), "propagation": []string{"jaeger"}}, "config.propagation"},
		{map[string]any{"endpoint": rc.endpoint(), "propagation": []string{"b3", "b3"}}, "config.propagation"},
		{map[string]any{"endpoint": rc.endpoint(), "sampling_ratio": 1.5}, "config.sampling_ratio"},
		{map[string]any{"endpoint": "ftp://x/v1/traces"}, "config.endpoint"},
		{map[string]any{}, "config.endpoint"},
		{map[string]any{"endpoint": g.AdminURL + "/v1/traces"}, "config.endpoint"},
	} {
		st, body := g.Do("POST", "/api/v1/plugins", map[string]any{"type": "opentelemetry", "scope": "route", "route_id": 1, "config": c.config})
		wantError(t, st, body, 400, c.field)
	}
}

func otelDropped(t *testing.T, g *testgw.Gateway, reason string) float64 {
	t.Helper()
	resp, err := http.Get(g.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "gateway_otel_spans_dropped_total{") && strings.Contains(line, `reason="`+reason+`"`) {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			return v
		}
	}
	t.Fatalf("/metrics lacks gateway_otel_spans_dropped_total{reason=%q}:\n%s", reason, b)
	return 0
}

// TestOpenTelemetryCollectorDown: with the collector refusing
// connections, traffic is served as before and the lost spans are
// counted; with a collector that does not answer, spans beyond the queue
// are dropped and counted, and requests do not wait for it.
func TestOpenTelemetryCollectorDown(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("r", sid, nil)
	pid := otelPlugin(g, map[string]any{"endpoint": "http://" + testgw.RefusingAddr(t) + "/v1/traces"})
	before := otelDropped(t, g, "export_failed")
	for i := 0; i < 20; i++ {
		g.WantGet("", "/down", 200)
	}
	poll.Until(t, "the failed export counted", func() bool { return otelDropped(t, g, "export_failed") >= before+40 })

	// A collector that never answers: once the exporter waits for it, a
	// queue of 4 fills and the rest is dropped; requests go on.
	rc := newReceiver(t)
	rc.hold = make(chan struct{})
	defer close(rc.hold)
	g.Must("PUT", fmt.Sprintf("/api/v1/plugins/%d", pid), map[string]any{"type": "opentelemetry", "scope": "global",
		"config": map[string]any{"endpoint": rc.endpoint(), "queue_size": 4}})
	full := otelDropped(t, g, "queue_full")
	g.WantGet("", "/slow", 200)
	poll.Until(t, "an export waiting at the collector", func() bool { return rc.arrived.Load() > 0 })
	for i := 0; i < 10; i++ {
		g.WantGet("", "/slow", 200)
	}
	if got := otelDropped(t, g, "queue_full"); got < full+16 {
		t.Fatalf("dropped on a full queue: %v, want at least %v", got, full+16)
	}
}

// TestOpenTelemetryReload: config changes while spans are queued and
// being exported lose none of them (the exporter of an unchanged
// destination is the same one), and a changed destination's old exporter
// sends what it had and stops.
func TestOpenTelemetryReload(t *testing.T) {
	g := testgw.Start(t, nil)
	rc := newReceiver(t)
	rc.delay = 300 * time.Millisecond // exports take a while
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("r", sid, nil)
	pid := otelPlugin(g, map[string]any{"endpoint": rc.endpoint()})
	base := opentelemetry.RunningExporters()

	const n = 30
	for i := 0; i < n; i++ {
		g.WantGet("", "/r", 200)
		if i%10 == 0 { // reloads while exports are under way
			g.Route(fmt.Sprintf("other-%d", i), sid, testgw.Paths(fmt.Sprintf("/other-%d", i)))
			g.Must("PUT", fmt.Sprintf("/api/v1/plugins/%d", pid), map[string]any{"type": "opentelemetry", "scope": "global",
				"config": map[string]any{"endpoint": rc.endpoint(), "sampling_ratio": 1, "service_name": fmt.Sprint("gw-", i)}})
		}
	}
	poll.Until(t, "every span", func() bool { return rc.count() >= 2*n })
	if got := opentelemetry.RunningExporters(); got != base {
		t.Fatalf("%d exporters run after reloads with one destination (%d before)", got, base)
	}

	// A new destination: the old exporter delivers what it has queued
	// and stops.
	rc2 := newReceiver(t)
	g.WantGet("", "/r", 200)
	g.Must("PUT", fmt.Sprintf("/api/v1/plugins/%d", pid), map[string]any{"type": "opentelemetry", "scope": "global",
		"config": map[string]any{"endpoint": rc2.endpoint()}})
	poll.Until(t, "the last span at the old collector", func() bool { return rc.count() >= 2*n+2 })
	g.WantGet("", "/r", 200)
	poll.Until(t, "spans at the new collector", func() bool { return rc2.count() >= 2 })
	if got := opentelemetry.RunningExporters(); got != base {
		t.Fatalf("%d exporters run after a destination change (%d before)", got, base)
	}
	// The plugin gone: its exporter stops.
	g.Must("DELETE", fmt.Sprintf("/api/v1/plugins/%d", pid), nil)
	poll.Until(t, "no exporter", func() bool { return opentelemetry.RunningExporters() == base-1 })
}
