package tests

import (
	"encoding/json"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/reqtest"
)

// TestPluginChainResponseHeaders: the response headers of bench/proxy.sh's
// chain (request-id, key-auth, rate-limit, response-transform) on every
// kind of answer. Each plugin changes the responses written after it in
// the chain (by the upstream, or by a later plugin), replacing an
// upstream's own copy, and not the answers written before it (a plugin
// earlier in the chain) or by the gateway once the chain has returned (a
// dead target's 502 keeps only the id set before the request went
// upstream).
func TestPluginChainResponseHeaders(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-ID", "upstream's")
		w.Header().Set("X-Served-By", "upstream")
		w.Header().Set("X-Upstream-Saw-ID", r.Header.Get("X-Request-ID"))
		w.Header().Set("X-Upstream-Saw-Consumer", r.Header.Get("X-Consumer-Username"))
		_, _ = w.Write([]byte("ok"))
	})
	sid := g.Service("s", testgw.Addr(up))
	g.Consumer("bench", map[string]any{"type": "key-auth", "key": "bench-key"})
	chain := func(rid int64, limit int) {
		addPlugin(t, g, "request-id", "route", rid, nil)
		addPlugin(t, g, "key-auth", "route", rid, nil)
		addPlugin(t, g, "rate-limit", "route", rid, map[string]any{"limit": limit, "window_s": 60})
		addPlugin(t, g, "response-transform", "route", rid, map[string]any{"set_headers": map[string]string{"X-Served-By": "gateway"}})
	}
	chain(g.Route("chain", sid, map[string]any{"paths": []string{"/chain"}}), 1)
	term := g.Route("term", sid, map[string]any{"paths": []string{"/term"}})
	chain(term, 100)
	addPlugin(t, g, "request-termination", "route", term, map[string]any{"status": 503, "message": "maintenance"})
	chain(g.Route("dead", g.DeadService("dead"), map[string]any{"paths": []string{"/dead"}}), 100)

	// the id the client got is the one the upstream got, and only one
	wantID := func(p proxied) string {
		t.Helper()
		ids := p.Header.Values("X-Request-ID")
		if len(ids) != 1 || !uuidV4.MatchString(ids[0]) {
			t.Fatalf("%d: X-Request-ID %q", p.Status, ids)
		}
		return ids[0]
	}
	wantServedBy := func(p proxied, want ...string) {
		t.Helper()
		if got := p.Header.Values("X-Served-By"); len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
			t.Fatalf("%d: X-Served-By %q, want %q", p.Status, got, want)
		}
	}

	// a plugin's error answer: one id, and no transform (response-transform
	// comes after every plugin that answers)
	wantPluginError := func(path string, status int, msg string, hdr ...string) proxied {
		t.Helper()
		p := send(t, g, "GET", path, nil, hdr...)
		wantGatewayError(t, p, status, msg)
		wantID(p)
		wantServedBy(p)
		return p
	}

	// key-auth's 401 comes before rate-limit and response-transform
	p := wantPluginError("/chain", http.StatusUnauthorized, "")
	if p.Header.Get("RateLimit-Limit") != "" {
		t.Fatalf("401 with rate-limit headers: %v", p.Header)
	}

	p = send(t, g, "GET", "/chain", nil, "apikey", "bench-key")
	if p.Status != 200 {
		t.Fatalf("status %d: %s", p.Status, p.Body)
	}
	if id := wantID(p); p.Header.Get("X-Upstream-Saw-ID") != id || p.Header.Get("X-Upstream-Saw-Consumer") != "bench" {
		t.Fatalf("upstream saw id %q consumer %q; client got id %q", p.Header.Get("X-Upstream-Saw-ID"), p.Header.Get("X-Upstream-Saw-Consumer"), id)
	}
	wantServedBy(p, "gateway")
	if p.Header.Get("RateLimit-Limit") != "1" || p.Header.Get("RateLimit-Remaining") != "0" || p.Header.Get("RateLimit-Reset") == "" {
		t.Fatalf("rate-limit headers: %v", p.Header)
	}

	// rate-limit's 429 comes before response-transform
	p = wantPluginError("/chain", http.StatusTooManyRequests, "", "apikey", "bench-key")
	if p.Header.Get("RateLimit-Limit") != "1" || p.Header.Get("Retry-After") == "" {
		t.Fatalf("429 headers: %v", p.Header)
	}

	// request-termination (ordered after rate-limit, before
	// response-transform) answers
	p = wantPluginError("/term", http.StatusServiceUnavailable, "maintenance", "apikey", "bench-key")
	if p.Header.Get("RateLimit-Limit") != "100" {
		t.Fatalf("request-termination's answer without rate-limit headers: %v", p.Header)
	}

	// the gateway's own answer once the chain returned: the id set before
	// the request went upstream, no transform
	p = send(t, g, "GET", "/dead", nil, "apikey", "bench-key")
	if p.Status != http.StatusBadGateway {
		t.Fatalf("dead target: %d %s", p.Status, p.Body)
	}
	wantID(p)
	wantServedBy(p)
}

// TestEarlyHintsThroughChain: a target's 103 Early Hints reach the client
// through bench/proxy.sh's chain before the final response, with the
// target's Link header only; the chain's headers are on the final
// response, which carries no Link.
func TestEarlyHintsThroughChain(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		_, _ = w.Write([]byte("ok"))
	})
	rid := g.Route("chain", g.Service("s", testgw.Addr(up)), map[string]any{"paths": []string{"/chain"}})
	addPlugin(t, g, "request-id", "route", rid, nil)
	addPlugin(t, g, "key-auth", "route", rid, nil)
	addPlugin(t, g, "rate-limit", "route", rid, map[string]any{"limit": 100, "window_s": 60})
	addPlugin(t, g, "response-transform", "route", rid, map[string]any{"set_headers": map[string]string{"X-Served-By": "gateway"}})
	g.Consumer("bench", map[string]any{"type": "key-auth", "key": "bench-key"})

	var hints []http.Header
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		if code == http.StatusEarlyHints {
			hints = append(hints, http.Header(h))
		}
		return nil
	}}
	req := reqtest.New(t, "GET", g.ProxyURL+"/chain", nil, "apikey", "bench-key")
	res, body := reqtest.Do(t, http.DefaultClient, req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if len(hints) != 1 || hints[0].Get("Link") != "</style.css>; rel=preload" {
		t.Fatalf("103s the client got: %v", hints)
	}
	for _, name := range []string{"X-Request-ID", "RateLimit-Limit", "X-Served-By"} {
		if hints[0].Get(name) != "" {
			t.Fatalf("the 103 carries the final response's %s: %v", name, hints[0])
		}
	}
	if res.StatusCode != 200 || string(body) != "ok" || res.Header.Get("Link") != "" ||
		res.Header.Get("X-Served-By") != "gateway" || res.Header.Get("RateLimit-Limit") != "100" || !uuidV4.MatchString(res.Header.Get("X-Request-ID")) {
		t.Fatalf("final answer %d %q, headers %v", res.StatusCode, body, res.Header)
	}
}

// A client cannot remove the headers the gateway adds by naming them in
// its Connection header (hop-by-hop): its own hop-by-hop headers go, the
// gateway's identity, request-id, forwarding and request-transform
// headers reach the upstream.
func TestConnectionCannotDropGatewayHeaders(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Consumer("c", map[string]any{"type": "key-auth", "key": "k"})
	rid := g.Route("r", sid, testgw.Paths("/r"))
	addPlugin(t, g, "request-id", "route", rid, nil)
	addPlugin(t, g, "key-auth", "route", rid, nil)
	addPlugin(t, g, "request-transform", "route", rid, map[string]any{"set_headers": map[string]string{"X-Gateway-Auth": "secret"}})
	p := send(t, g, "GET", "/r", nil, "apikey", "k", "X-Hop", "client's",
		"Connection", "X-Consumer-ID, x-consumer-username,X-Request-ID, X-Gateway-Auth, X-Forwarded-For, X-Forwarded-Proto, Via, X-Hop")
	var seen testgw.Echoed
	if p.Status != 200 || json.Unmarshal([]byte(p.Body), &seen) != nil {
		t.Fatalf("%d %s", p.Status, p.Body)
	}
	for _, h := range []string{"X-Consumer-Id", "X-Consumer-Username", "X-Request-Id", "X-Gateway-Auth", "X-Forwarded-For", "X-Forwarded-Proto", "Via"} {
		if seen.Headers.Get(h) == "" {
			t.Errorf("the client's Connection header removed the gateway's %s: the upstream saw %v", h, seen.Headers)
		}
	}
	if seen.Headers.Get("X-Hop") != "" || seen.Headers.Get("Connection") != "" {
		t.Errorf("the client's hop-by-hop header reached the upstream: %v", seen.Headers)
	}
}

// TestSplitRunsTheRoutesServiceChain pins what docs/routing.md says of
// splits: the chain is the route's, with its own service's plugins,
// whichever service the split picks; the picked service's own
// service-scoped plugins do not run.
func TestSplitRunsTheRoutesServiceChain(t *testing.T) {
	g := testgw.Start(t, nil)
	a := g.Service("a", testgw.Addr(testgw.Echo(t, "A")))
	b := g.Service("b", testgw.Addr(testgw.Echo(t, "B")))
	g.Route("split", a, map[string]any{"paths": []string{"/s"}, "splits": []map[string]any{{"service_id": b, "weight": 1}}})
	addPlugin(t, g, "key-auth", "service", a, nil)
	addPlugin(t, g, "request-termination", "service", b, map[string]any{"status": 418})
	g.Consumer("alice", map[string]any{"type": "key-auth", "key": "alice-key"})

	wantGatewayError(t, send(t, g, "GET", "/s", nil), 401, "")
	if p := send(t, g, "GET", "/s", nil, "apikey", "alice-key"); p.Status != 200 || testgw.DecodeEcho(t, p.Body).Name != "B" {
		t.Fatalf("split to b: %d %s", p.Status, p.Body)
	}
}
