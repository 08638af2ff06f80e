package tests

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestPluginRateLimitThroughGateway: 429 {error} with Retry-After; every
// response carries RateLimit-*; keys ip, consumer, route, service, header.
func TestPluginRateLimitThroughGateway(t *testing.T) {
	g, sid := echoGateway(t)
	other := g.Service("o", testgw.Addr(testgw.Echo(t, "other")))
	r := g.PathRoutes(sid, "/ip", "/hdr", "/cons")
	byIP, byHeader, byConsumer := r[0], r[1], r[2]
	r1 := g.PathRoutes(other, "/r1", "/r2")[0]
	addPlugin(t, g, "rate-limit", "route", byIP, map[string]any{"limit": 2})
	addPlugin(t, g, "rate-limit", "route", byHeader, map[string]any{"limit": 1, "key": "header", "header_name": "X-Tenant"})
	addPlugin(t, g, "rate-limit", "route", byConsumer, map[string]any{"limit": 1, "key": "consumer"})
	addPlugin(t, g, "key-auth", "route", byConsumer, nil)
	addPlugin(t, g, "rate-limit", "service", other, map[string]any{"limit": 2, "key": "service"})
	addPlugin(t, g, "rate-limit", "route", r1, map[string]any{"limit": 1, "key": "route"})
	for _, u := range []string{"u1", "u2"} {
		g.Consumer(u, map[string]any{"type": "key-auth", "key": u})
	}

	for i, want := range []string{"1", "0"} {
		p := send(t, g, "GET", "/ip", nil)
		if p.Status != 200 || p.Header.Get("RateLimit-Limit") != "2" || p.Header.Get("RateLimit-Remaining") != want || p.Header.Get("RateLimit-Reset") == "" {
			t.Fatalf("request %d: %d %v", i, p.Status, p.Header)
		}
	}
	p := send(t, g, "GET", "/ip", nil)
	wantGatewayError(t, p, 429, "")
	if ra, err := strconv.Atoi(p.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 || p.Header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("429 headers: %v", p.Header)
	}

	if send(t, g, "GET", "/hdr", nil, "X-Tenant", "a").Status != 200 || send(t, g, "GET", "/hdr", nil, "X-Tenant", "b").Status != 200 {
		t.Fatal("key header: different values have their own counters")
	}
	wantGatewayError(t, send(t, g, "GET", "/hdr", nil, "X-Tenant", "a"), 429, "")

	if send(t, g, "GET", "/cons", nil, "apikey", "u1").Status != 200 || send(t, g, "GET", "/cons", nil, "apikey", "u2").Status != 200 {
		t.Fatal("key consumer: different consumers have their own counters")
	}
	wantGatewayError(t, send(t, g, "GET", "/cons", nil, "apikey", "u1"), 429, "")

	// route key on r1 (limit 1) shadows the service-scoped one there; r2
	// uses the service counter (limit 2).
	if send(t, g, "GET", "/r1", nil).Status != 200 {
		t.Fatal("r1 first")
	}
	wantGatewayError(t, send(t, g, "GET", "/r1", nil), 429, "")
	if send(t, g, "GET", "/r2", nil).Status != 200 || send(t, g, "GET", "/r2", nil).Status != 200 {
		t.Fatal("r2 within the service limit")
	}
	wantGatewayError(t, send(t, g, "GET", "/r2", nil), 429, "")
}

// TestPluginProxyCacheThroughGateway: Miss, Hit, Bypass (method, request
// no-cache), purge through the admin API.
func TestPluginProxyCacheThroughGateway(t *testing.T) {
	g := testgw.Start(t, nil)
	var hits atomic.Int64
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "answer %d", n)
	})
	sid := g.Service("s", strings.TrimPrefix(up.URL, "http://"))
	g.Route("all", sid, nil)
	addPlugin(t, g, "proxy-cache", "global", 0, nil)

	p1 := send(t, g, "GET", "/c", nil)
	p2 := send(t, g, "GET", "/c", nil)
	if p1.Header.Get("X-Cache-Status") != "Miss" || p2.Header.Get("X-Cache-Status") != "Hit" || p1.Body != p2.Body || hits.Load() != 1 {
		t.Fatalf("miss then hit: %v %q / %v %q (upstream %d)", p1.Header, p1.Body, p2.Header, p2.Body, hits.Load())
	}
	if p := send(t, g, "POST", "/c", strings.NewReader("x")); p.Header.Get("X-Cache-Status") != "Bypass" {
		t.Fatalf("POST: %v", p.Header)
	}
	if p := send(t, g, "GET", "/c", nil, "Cache-Control", "no-cache"); p.Header.Get("X-Cache-Status") != "Bypass" {
		t.Fatalf("no-cache: %v", p.Header)
	}
	var purged map[string]any
	if st := g.JSON("POST", "/api/v1/cache/purge", nil, &purged); st != 200 || purged["purged"].(float64) < 1 {
		t.Fatalf("purge: %d %v", st, purged)
	}
	if p := send(t, g, "GET", "/c", nil); p.Header.Get("X-Cache-Status") != "Miss" {
		t.Fatalf("after purge: %v", p.Header)
	}
}

// TestPluginTransformsThroughGateway: request-transform (headers, query,
// placeholders) and response-transform.
func TestPluginTransformsThroughGateway(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Server", "secret-upstream")
		w.Header().Set("X-Old", "v")
		_ = json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "query": r.URL.RawQuery, "headers": r.Header})
	})
	sid := g.Service("s", strings.TrimPrefix(up.URL, "http://"))
	g.Route("all", sid, nil)
	addPlugin(t, g, "request-id", "global", 0, nil)
	addPlugin(t, g, "request-transform", "global", 0, map[string]any{
		"remove_headers": []string{"X-Drop"},
		"rename_headers": map[string]string{"X-Before": "X-After"},
		"set_headers":    map[string]string{"X-Client": "{http.request.remote.host}", "X-Rid": "{http.vars.request_id}"},
		"add_headers":    map[string]string{"X-Added": "1"},
		"remove_query":   []string{"drop"},
		"set_query":      map[string]string{"v": "2"},
	})
	addPlugin(t, g, "response-transform", "global", 0, map[string]any{
		"remove_headers": []string{"Server"},
		"rename_headers": map[string]string{"X-Old": "X-New"},
		"set_headers":    map[string]string{"X-Powered": "gw"},
	})
	p := send(t, g, "GET", "/t?drop=1&keep=1&v=1", nil, "X-Drop", "x", "X-Before", "b")
	e := testgw.DecodeEcho(t, p.Body)
	h := e.Headers
	if p.Status != 200 || h["X-Drop"] != nil || h["X-Before"] != nil || h["X-After"][0] != "b" || h["X-Added"][0] != "1" ||
		h["X-Client"][0] != "127.0.0.1" || h["X-Rid"][0] != p.Header.Get("X-Request-ID") {
		t.Fatalf("upstream request headers: %d %v", p.Status, h)
	}
	if e.Query != "keep=1&v=2" {
		t.Fatalf("query %q", e.Query)
	}
	if p.Header.Get("Server") != "" || p.Header.Get("X-Old") != "" || p.Header.Get("X-New") != "v" || p.Header.Get("X-Powered") != "gw" {
		t.Fatalf("response headers: %v", p.Header)
	}
}

// TestPluginResponseBodyTransformThroughGateway: replace and json edits;
// Content-Length matches the new body.
func TestPluginResponseBodyTransformThroughGateway(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b := []byte(`{"user":{"name":"ann","password":"x"},"host":"internal.local"}`)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	})
	sid := g.Service("s", strings.TrimPrefix(up.URL, "http://"))
	g.Route("all", sid, nil)
	addPlugin(t, g, "response-body-transform", "global", 0, map[string]any{
		"replace":     []any{map[string]any{"pattern": `internal\.local`, "with": "api.example.com"}},
		"json_remove": []string{"user.password"},
		"json_set":    map[string]any{"user.role": "admin"},
	})
	p := send(t, g, "GET", "/", nil)
	var doc map[string]any
	if err := json.Unmarshal([]byte(p.Body), &doc); err != nil {
		t.Fatalf("body %q: %v", p.Body, err)
	}
	user := doc["user"].(map[string]any)
	if doc["host"] != "api.example.com" || user["password"] != nil || user["role"] != "admin" || user["name"] != "ann" {
		t.Fatalf("body %s", p.Body)
	}
	if cl := p.Header.Get("Content-Length"); cl != strconv.Itoa(len(p.Body)) {
		t.Fatalf("Content-Length %q for a body of %d bytes", cl, len(p.Body))
	}
	// HEAD: the upstream's length is that of the untransformed body; it
	// must not be announced.
	h := send(t, g, "HEAD", "/", nil)
	if cl := h.Header.Get("Content-Length"); h.Status != 200 || (cl != "" && cl != strconv.Itoa(len(p.Body))) {
		t.Fatalf("HEAD: %d, Content-Length %q; the GET body has %d bytes", h.Status, cl, len(p.Body))
	}
}

// TestPluginResponseCompressionThroughGateway: gzip and zstd by
// Accept-Encoding; min_length; identity for clients without it.
func TestPluginResponseCompressionThroughGateway(t *testing.T) {
	g := testgw.Start(t, nil)
	big := strings.Repeat("compress me please ", 100)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path == "/small" {
			io.WriteString(w, "tiny")
			return
		}
		io.WriteString(w, big)
	})
	sid := g.Service("s", strings.TrimPrefix(up.URL, "http://"))
	g.Route("all", sid, nil)
	addPlugin(t, g, "response-compression", "global", 0, nil)

	p := send(t, g, "GET", "/big", nil, "Accept-Encoding", "gzip")
	if p.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip: %v", p.Header)
	}
	zr, err := gzip.NewReader(strings.NewReader(p.Body))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(zr); string(b) != big {
		t.Fatalf("gunzipped body differs")
	}
	p = send(t, g, "GET", "/big", nil, "Accept-Encoding", "gzip, zstd")
	if p.Header.Get("Content-Encoding") != "zstd" {
		t.Fatalf("zstd preferred: %v", p.Header)
	}
	d, _ := zstd.NewReader(bytes.NewReader([]byte(p.Body)))
	if b, err := io.ReadAll(d); err != nil || string(b) != big {
		t.Fatalf("zstd body: %v", err)
	}
	if p := send(t, g, "GET", "/small", nil, "Accept-Encoding", "gzip"); p.Header.Get("Content-Encoding") != "" || p.Body != "tiny" {
		t.Fatalf("below min_length: %v %q", p.Header, p.Body)
	}
	if p := send(t, g, "GET", "/big", nil); p.Header.Get("Content-Encoding") != "" || p.Body != big {
		t.Fatalf("identity: %v", p.Header)
	}
}

// TestPluginHSTSThroughGateway: Strict-Transport-Security on HTTPS
// responses only.
func TestPluginHSTSThroughGateway(t *testing.T) {
	g, pool := startWithCert(t, "secure.test")
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("all", sid, nil)
	httpsAddr := enableHTTPS(t, g)
	addPlugin(t, g, "hsts", "global", 0, map[string]any{"include_subdomains": true})

	if p := send(t, g, "GET", "/", nil, "Host", "secure.test"); p.Status != 200 || p.Header.Get("Strict-Transport-Security") != "" {
		t.Fatalf("plain HTTP: %d %v", p.Status, p.Header)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "secure.test"}}}
	resp, err := c.Get("https://" + httpsAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Strict-Transport-Security"); resp.StatusCode != 200 || got != "max-age=31536000; includeSubDomains" {
		t.Fatalf("HTTPS: %d %q", resp.StatusCode, got)
	}
}

// TestPluginProxyCacheKeepsSchemesApart: a response cached for an HTTPS
// request (with hsts's Strict-Transport-Security) is not served to a
// plain-HTTP request for the same URL: hsts is for HTTPS responses only.
func TestPluginProxyCacheKeepsSchemesApart(t *testing.T) {
	g, pool := startWithCert(t, "secure.test")
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("all", sid, nil)
	httpsAddr := enableHTTPS(t, g)
	addPlugin(t, g, "hsts", "global", 0, nil)
	addPlugin(t, g, "proxy-cache", "global", 0, nil)

	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "secure.test"}}}
	for _, want := range []string{"Miss", "Hit"} {
		req, _ := http.NewRequest("GET", "https://"+httpsAddr+"/page", nil)
		req.Host = "secure.test"
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Cache-Status") != want || resp.Header.Get("Strict-Transport-Security") == "" {
			t.Fatalf("HTTPS, want %s with HSTS: %v", want, resp.Header)
		}
	}
	p := send(t, g, "GET", "/page", nil, "Host", "secure.test")
	if p.Status != 200 || p.Header.Get("Strict-Transport-Security") != "" || p.Header.Get("X-Cache-Status") != "Miss" {
		t.Fatalf("plain HTTP got the HTTPS entry: %d %v", p.Status, p.Header)
	}
	if e := testgw.DecodeEcho(t, p.Body); e.Headers["X-Forwarded-Proto"][0] != "http" {
		t.Fatalf("plain HTTP got the upstream's answer to an HTTPS request: %v", e.Headers["X-Forwarded-Proto"])
	}
}

// TestPluginProxyCacheKeepsRoutesApart: one global proxy-cache serves
// several routes; a response cached for one route is never served for
// another, also when strip_path makes their upstream paths equal or when
// the routes differ only in a header condition.
func TestPluginProxyCacheKeepsRoutesApart(t *testing.T) {
	g := testgw.Start(t, nil)
	one, two, three := g.Service("one", testgw.Addr(testgw.Echo(t, "one"))), g.Service("two", testgw.Addr(testgw.Echo(t, "two"))), g.Service("three", testgw.Addr(testgw.Echo(t, "three")))
	g.Route("a", one, map[string]any{"paths": []string{"/a"}, "strip_path": true})
	g.Route("b", two, map[string]any{"paths": []string{"/b"}, "strip_path": true})
	g.Route("v2", three, map[string]any{"paths": []string{"/b"}, "strip_path": true, "headers": map[string]any{"X-Version": "2"}})
	addPlugin(t, g, "proxy-cache", "global", 0, nil)

	check := func(path, want, status string, hdr ...string) {
		t.Helper()
		p := send(t, g, "GET", path, nil, hdr...)
		if e := testgw.DecodeEcho(t, p.Body); e.Name != want || e.Path != "/x" || p.Header.Get("X-Cache-Status") != status {
			t.Fatalf("%s %v: served by %q (path %q), %s; want %q, %s", path, hdr, e.Name, e.Path, p.Header.Get("X-Cache-Status"), want, status)
		}
	}
	check("/a/x", "one", "Miss")
	check("/a/x", "one", "Hit")
	check("/b/x", "two", "Miss")
	check("/b/x", "two", "Hit")
	check("/b/x", "three", "Miss", "X-Version", "2")
	check("/b/x", "three", "Hit", "X-Version", "2")
	check("/b/x", "two", "Hit")
}

// TestPluginProxyCacheKeepsNoRequestValues: a response-transform after the
// proxy-cache (the default orderings) that fills a header in with the
// request's placeholders makes the response uncacheable: stored, it would
// answer the next client with the first one's values (a hit runs no
// plugin after the cache). Static values are cached as before.
func TestPluginProxyCacheKeepsNoRequestValues(t *testing.T) {
	g := testgw.Start(t, nil)
	dyn := g.Service("dyn", testgw.Addr(testgw.Echo(t, "dyn")))
	static := g.Service("static", testgw.Addr(testgw.Echo(t, "static")))
	g.Route("dyn", dyn, testgw.Paths("/dyn"))
	g.Route("static", static, testgw.Paths("/static"))
	addPlugin(t, g, "proxy-cache", "global", 0, nil)
	transform := addPlugin(t, g, "response-transform", "service", dyn, map[string]any{"set_headers": map[string]string{"X-Client": "{http.request.header.X-Name}"}})
	addPlugin(t, g, "response-transform", "service", static, map[string]any{"set_headers": map[string]string{"X-Static": "s"}})

	for _, name := range []string{"alice", "bob", "carol"} {
		p := send(t, g, "GET", "/dyn", nil, "X-Name", name)
		if p.Status != 200 || p.Header.Get("X-Client") != name || p.Header.Get("X-Cache-Status") != "Bypass" {
			t.Fatalf("%s: %d X-Client %q, %s", name, p.Status, p.Header.Get("X-Client"), p.Header.Get("X-Cache-Status"))
		}
	}
	for _, want := range []string{"Miss", "Hit"} {
		p := send(t, g, "GET", "/static", nil)
		if p.Header.Get("X-Static") != "s" || p.Header.Get("X-Cache-Status") != want {
			t.Fatalf("static: X-Static %q, %s, want %s", p.Header.Get("X-Static"), p.Header.Get("X-Cache-Status"), want)
		}
	}
	// A transform before the cache changes every answer, hits too, and
	// keeps nothing from being stored.
	g.Must("PUT", fmt.Sprintf("/api/v1/plugins/%d", transform), map[string]any{"type": "response-transform", "scope": "service", "service_id": dyn, "ordering": 900,
		"config": map[string]any{"set_headers": map[string]string{"X-Client": "{http.request.header.X-Name}"}}})
	for i, name := range []string{"dave", "erin"} {
		p := send(t, g, "GET", "/dyn", nil, "X-Name", name)
		if want := []string{"Miss", "Hit"}[i]; p.Header.Get("X-Client") != name || p.Header.Get("X-Cache-Status") != want {
			t.Fatalf("transform before the cache, %s: X-Client %q, %s, want %s", name, p.Header.Get("X-Client"), p.Header.Get("X-Cache-Status"), want)
		}
	}
}
