package router_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/reqtest"
	_ "github.com/caddy-gateway/gateway/modules/plugins/proxycache"
	_ "github.com/caddy-gateway/gateway/modules/plugins/traffic"
)

// TestHeaderHooksAnswerAsWrappers: the plugins that change the response
// header register a hook of the gateway's writer (gwctx.RecordingWriter)
// when handed it, and wrap any other writer. Every request goes through
// the same router twice, once on each path, and the client must get the
// same answer (1xx and final status, headers, body): for each way the
// upstream can write, for plugins that answer themselves or change the
// body, for an order where the header is changed after request-id's
// echo, for a chain with more hooks than the writer has room for (the
// last plugin wraps, inside the hooks), and for an error the chain
// returns (the gateway's own answer, without the chain's changes).
func TestHeaderHooksAnswerAsWrappers(t *testing.T) {
	cfg := `{
		"routes": [
			{"id": 1, "service_id": 1, "paths": ["/basic"], "plugins": [1, 2]},
			{"id": 2, "service_id": 1, "paths": ["/gzip"], "plugins": [1, 2, 3]},
			{"id": 3, "service_id": 1, "paths": ["/body"], "plugins": [1, 2, 4]},
			{"id": 4, "service_id": 1, "paths": ["/terminate"], "plugins": [1, 2, 5]},
			{"id": 5, "service_id": 1, "paths": ["/cors"], "plugins": [1, 6, 2]},
			{"id": 6, "service_id": 1, "paths": ["/cache"], "plugins": [1, 7, 2]},
			{"id": 7, "service_id": 1, "paths": ["/reorder"], "plugins": [8, 1]},
			{"id": 8, "service_id": 1, "paths": ["/full"], "plugins": [1, 11, 10, 9]}
		],
		"services": {"1": {"handler": "router_test_upstream"}},
		"plugins": {
			"1": {"handler": "gateway_request_id", "header_name": "X-Request-ID", "trust_incoming": true, "echo_downstream": true},
			"2": {"handler": "gateway_response_transform", "set_headers": {"X-Served-By": "gateway"}, "rename_headers": {"X-Upstream": "X-Renamed"}},
			"3": {"handler": "gateway_response_compression", "encodings": ["gzip"], "min_length": 10},
			"4": {"handler": "gateway_response_body_transform", "replace": [{"pattern": "hello", "with": "bye"}], "content_types": ["text/plain"], "max_body_bytes": 1048576},
			"5": {"handler": "gateway_request_termination", "status": 503, "message": "closed"},
			"6": {"handler": "gateway_cors", "allow_origins": ["*"], "allow_methods": ["GET"], "max_age_s": 600},
			"7": {"handler": "gateway_proxy_cache", "ttl_s": 60, "methods": ["GET"], "status_codes": [200], "max_body_bytes": 1048576, "instance_id": 7},
			"8": {"handler": "gateway_response_transform", "remove_headers": ["X-Request-ID"], "set_headers": {"X-Outer": "1"}},
			"9": {"handler": "gateway_response_transform", "rename_headers": {"X-A": "X-B"}},
			"10": {"handler": "gateway_response_transform", "rename_headers": {"X-B": "X-C"}},
			"11": {"handler": "gateway_response_transform", "rename_headers": {"X-C": "X-D"}}
		}
	}`
	rt := provision(t, cfg)
	srv := &caddyhttp.Server{}
	gateway := func(wrap bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// as the gateway's proxy server does (app/controlplane)
			st := &struct {
				info gwctx.Info
				rw   gwctx.RecordingWriter
			}{info: gwctx.Info{Start: time.Now(), RecordBuilt: true}}
			st.rw.ResponseWriter = w
			var out http.ResponseWriter = &st.rw
			if wrap {
				out = &foreignWriter{caddyhttp.ResponseWriterWrapper{ResponseWriter: &st.rw}}
			}
			r = gwctx.With(r, &st.info)
			r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), out, srv)
			if err := rt.ServeHTTP(out, r, nil); err != nil && st.rw.Status == 0 {
				status := http.StatusInternalServerError
				var he caddyhttp.HandlerError
				if errors.As(err, &he) {
					status = he.StatusCode
				}
				gwctx.WriteError(&st.rw, status, http.StatusText(status))
			}
		}))
	}
	hooked, wrapped := gateway(false), gateway(true)
	defer hooked.Close()
	defer wrapped.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()

	type request struct {
		method, path string
		header       []string // name, value pairs
	}
	get := func(path string, header ...string) request { return request{"GET", path, header} }
	for _, c := range []struct {
		name string
		reqs []request
		want []string // "Name: value" in an answer, or "Name:": absent from the last
	}{
		{"WriteHeader then Write", []request{get("/basic?m=writeheader")}, []string{"X-Served-By: gateway", "X-Renamed: up", "X-Request-Id: 11111111-2222-4333-8444-555555555555"}},
		{"Write only", []request{get("/basic?m=write")}, []string{"X-Served-By: gateway"}},
		{"ReadFrom", []request{get("/basic?m=readfrom")}, []string{"X-Served-By: gateway"}},
		// Nothing written inside the chain: the server's implicit 200 after
		// it returned carries none of the plugins' headers, either way.
		{"no write", []request{get("/basic?m=none")}, []string{"X-Served-By:"}},
		{"Flush before WriteHeader", []request{get("/basic?m=flush")}, []string{"X-Served-By: gateway"}},
		{"103 before the final status", []request{get("/basic?m=103")}, []string{"X-Served-By: gateway"}},
		{"error returned by the chain", []request{get("/basic?m=error")}, []string{"X-Served-By:"}},
		{"Flush then error", []request{get("/basic?m=flusherror")}, []string{"X-Served-By: gateway"}},
		{"response-compression", []request{get("/gzip?m=write", "Accept-Encoding", "gzip")}, []string{"Content-Encoding: gzip", "X-Served-By: gateway"}},
		{"response-compression, 103", []request{get("/gzip?m=103", "Accept-Encoding", "gzip")}, []string{"Content-Encoding: gzip"}},
		{"response-body-transform", []request{get("/body?m=write")}, []string{"X-Served-By: gateway"}},
		{"request-termination", []request{get("/terminate")}, []string{"X-Served-By: gateway"}},
		{"CORS preflight", []request{{"OPTIONS", "/cors", []string{"Origin", "https://app.example", "Access-Control-Request-Method", "GET"}}}, []string{"Access-Control-Allow-Origin: *"}},
		{"CORS request", []request{get("/cors?m=write", "Origin", "https://app.example")}, []string{"Access-Control-Allow-Origin: *", "X-Served-By: gateway"}},
		{"proxy-cache miss then hit", []request{get("/cache?m=write"), get("/cache?m=write")}, []string{"X-Cache-Status: Miss", "X-Cache-Status: Hit", "X-Served-By: gateway"}},
		{"response-transform before request-id", []request{get("/reorder?m=write")}, []string{"X-Request-Id:", "X-Outer: 1"}},
		{"more hooks than the writer holds", []request{get("/full?m=write")}, []string{"X-D: up", "X-A:", "X-B:", "X-C:"}},
	} {
		// each path's answers to the whole sequence (the cache's first
		// request is a miss on each: the two servers' hosts differ, and
		// so do their cache keys)
		var got [2]string
		for i, base := range []string{hooked.URL, wrapped.URL} {
			for _, req := range c.reqs {
				got[i] += answer(t, client, req.method, base+req.path, append(slices.Clip(req.header), "X-Request-ID", "11111111-2222-4333-8444-555555555555")...)
			}
		}
		if got[0] != got[1] {
			t.Errorf("%s: the hooks' answers differ from the wrappers'\nhooks:\n%s\nwrappers:\n%s", c.name, got[0], got[1])
			continue
		}
		final := got[0][strings.LastIndex(got[0], "\nstatus "):]
		for _, w := range c.want {
			name, value, _ := strings.Cut(w, ":")
			if value != "" && !strings.Contains(got[0], "\n"+w+"\n") || value == "" && strings.Contains(final, "\n"+name+": ") {
				t.Errorf("%s: want %q (absent: in the last answer):\n%s", c.name, w, got[0])
			}
		}
	}
}

// answer sends a request and describes what the client got: any 1xx,
// then the final status, headers (sorted, without Date) and body.
func answer(t *testing.T, client *http.Client, method, url string, header ...string) string {
	t.Helper()
	var b strings.Builder
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		fmt.Fprintf(&b, "\ninformational %d%s", code, headerLines(http.Header(h)))
		return nil
	}}
	req := reqtest.New(t, method, url, nil, header...)
	resp, body := reqtest.Do(t, client, req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	fmt.Fprintf(&b, "\nstatus %d%sbody %q\n", resp.StatusCode, headerLines(resp.Header), body)
	return b.String()
}

// headerLines is h as sorted "Name: value" lines, without Date, each
// preceded by a newline.
func headerLines(h http.Header) string {
	var lines []string
	for k, v := range h {
		if k != "Date" {
			lines = append(lines, "\n"+k+": "+strings.Join(v, ", "))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "") + "\n"
}

// foreignWriter is a writer the plugins do not recognise as the gateway's:
// they wrap it.
type foreignWriter struct {
	caddyhttp.ResponseWriterWrapper
}

// testUpstream answers as the query's m says, with headers the plugins
// change.
type testUpstream struct{}

func init() { caddy.RegisterModule(testUpstream{}) }

func (testUpstream) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.router_test_upstream", New: func() caddy.Module { return new(testUpstream) }}
}

func (testUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h := w.Header()
	h.Set("X-Request-ID", "upstream")
	h.Set("Content-Type", "text/plain")
	h.Set("X-Upstream", "up")
	h.Set("X-A", "up")
	body := strings.Repeat("hello upstream ", 50)
	switch r.URL.Query().Get("m") {
	case "writeheader":
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, body)
	case "write":
		_, _ = io.WriteString(w, body)
	case "readfrom":
		_, _ = w.(io.ReaderFrom).ReadFrom(strings.NewReader(body))
	case "flush":
		_ = http.NewResponseController(w).Flush()
		_, _ = io.WriteString(w, body)
	case "103":
		h.Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, body)
	case "error":
		return caddyhttp.Error(http.StatusGatewayTimeout, errors.New("upstream timeout"))
	case "flusherror":
		_ = http.NewResponseController(w).Flush()
		return caddyhttp.Error(http.StatusGatewayTimeout, errors.New("upstream timeout"))
	}
	return nil
}

// TestLookalikeHeadersRemoved: the router removes a client's identity and
// X-Forwarded-* headers spelled with '_' (any case), which CGI-style
// upstreams read as the real ones, whatever the server in front let
// through (Caddy's own server drops names with '_' unless configured
// otherwise; this drives the router directly). Other headers with '_' pass.
func TestLookalikeHeadersRemoved(t *testing.T) {
	rt := provision(t, `{
		"routes": [{"id": 1, "service_id": 1, "paths": ["/"]}],
		"services": {"1": {"handler": "router_test_seen"}}
	}`)
	seen := seenHeaders(t, rt, "192.0.2.7:4000", // not a trusted proxy
		"X_Consumer_Username", "x_consumer_id", "X-Consumer_Groups", "X_CONSUMER_CUSTOM_ID", "X_Forwarded_For", "x_forwarded_host", "X_Other_Header")
	if !slices.Contains(seen, "X_Other_Header") {
		t.Fatalf("a header with '_' that is no lookalike was removed: upstream saw %q", seen)
	}
	for _, name := range seen {
		if n := strings.ToLower(strings.ReplaceAll(name, "_", "-")); strings.HasPrefix(n, "x-consumer-") || strings.HasPrefix(n, "x-forwarded-") {
			t.Errorf("the upstream saw the client's %s", name)
		}
	}
}

// TestClientForwardingHeadersRemoved: Forwarded, X-Real-IP and the other
// X-Forwarded-* a proxy in front would set are removed (and their '_'
// spellings) when the client is no trusted proxy, and kept from a trusted
// one.
func TestClientForwardingHeadersRemoved(t *testing.T) {
	rt := provision(t, `{
		"routes": [{"id": 1, "service_id": 1, "paths": ["/"]}],
		"services": {"1": {"handler": "router_test_seen"}},
		"trusted_proxies": ["10.0.0.0/8"]
	}`)
	forged := []string{"Forwarded", "X-Real-Ip", "X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Uri", "X_Real_IP", "x_forwarded_prefix",
		"True-Client-Ip", "X-Client-Ip", "X-Original-Url", "X-Rewrite-Url"}
	for _, c := range []struct {
		peer string
		kept bool
	}{{"192.0.2.7:4000", false}, {"10.1.2.3:4000", true}} {
		seen := seenHeaders(t, rt, c.peer, append(forged, "X-Other")...)
		if !slices.Contains(seen, "X-Other") {
			t.Fatalf("from %s: an unrelated header was removed: %q", c.peer, seen)
		}
		for _, name := range forged {
			if slices.Contains(seen, name) != c.kept {
				t.Errorf("from %s: %s seen %v, want %v", c.peer, name, !c.kept, c.kept)
			}
		}
	}
}

// seenHeaders sends rt a request from peer with the named headers (each
// "forged") and answers the header names its router_test_seen service got.
func seenHeaders(t *testing.T, rt caddyhttp.MiddlewareHandler, peer string, names ...string) []string {
	t.Helper()
	r := httptest.NewRequest("GET", "http://gw.test/", nil)
	r.RemoteAddr = peer
	for _, name := range names {
		r.Header[name] = []string{"forged"}
	}
	w := httptest.NewRecorder()
	r = gwctx.With(r, &gwctx.Info{Start: time.Now(), RecordBuilt: true})
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, &caddyhttp.Server{})
	if err := rt.ServeHTTP(w, r, nil); err != nil {
		t.Fatal(err)
	}
	return strings.Split(w.Body.String(), ",")
}

// seenUpstream answers with the names of the request headers it got.
type seenUpstream struct{}

func init() { caddy.RegisterModule(seenUpstream{}) }

func (seenUpstream) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.router_test_seen", New: func() caddy.Module { return new(seenUpstream) }}
}

func (seenUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	var names []string
	for k := range r.Header {
		names = append(names, k)
	}
	_, _ = w.Write([]byte(strings.Join(names, ",")))
	return nil
}
