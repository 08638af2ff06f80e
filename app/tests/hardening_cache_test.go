package tests

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestProxyCacheNeverCrossesAuthentication: a proxy-cache whose ordering
// puts it before the access plugins (here 10, before key-auth and
// ip-restriction) still runs after them: a response cached for alice is
// served neither to an anonymous client nor to bob, and one cached for an
// allowed address is not served once the address is refused.
func TestProxyCacheNeverCrossesAuthentication(t *testing.T) {
	g, sid := echoGateway(t)
	r := g.PathRoutes(sid, "/ka", "/ip")
	ka, ip := r[0], r[1]
	addPlugin(t, g, "key-auth", "route", ka, nil)
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "proxy-cache", "scope": "global", "ordering": 10})
	g.Consumer("alice", map[string]any{"type": "key-auth", "key": "alice-key"})
	g.Consumer("bob", map[string]any{"type": "key-auth", "key": "bob-key"})

	get := func(path, want, status string, hdr ...string) {
		t.Helper()
		p := send(t, g, "GET", path, nil, hdr...)
		if p.Status != 200 {
			t.Fatalf("%s %v: %d %s", path, hdr, p.Status, p.Body)
		}
		if e := testgw.DecodeEcho(t, p.Body); fmt.Sprint(e.Headers["X-Consumer-Username"]) != "["+want+"]" || p.Header.Get("X-Cache-Status") != status {
			t.Fatalf("%s %v: consumer %v, %s; want [%s], %s", path, hdr, e.Headers["X-Consumer-Username"], p.Header.Get("X-Cache-Status"), want, status)
		}
	}
	get("/ka/x", "alice", "Miss", "apikey", "alice-key")
	get("/ka/x", "alice", "Hit", "apikey", "alice-key")
	wantGatewayError(t, send(t, g, "GET", "/ka/x", nil), 401, "")
	wantGatewayError(t, send(t, g, "GET", "/ka/x", nil, "apikey", "wrong"), 401, "")
	get("/ka/x", "bob", "Miss", "apikey", "bob-key")
	get("/ka/x", "bob", "Hit", "apikey", "bob-key")
	get("/ka/x", "alice", "Hit", "apikey", "alice-key")

	ipr := addPlugin(t, g, "ip-restriction", "route", ip, map[string]any{"allow": []string{"127.0.0.1", "::1"}})
	p1, p2 := send(t, g, "GET", "/ip/x", nil), send(t, g, "GET", "/ip/x", nil)
	if p1.Header.Get("X-Cache-Status") != "Miss" || p2.Header.Get("X-Cache-Status") != "Hit" {
		t.Fatalf("allowed address: %s then %s", p1.Header.Get("X-Cache-Status"), p2.Header.Get("X-Cache-Status"))
	}
	g.Must("PUT", fmt.Sprintf("/api/v1/plugins/%d", ipr), map[string]any{"type": "ip-restriction", "scope": "route", "route_id": ip,
		"config": map[string]any{"deny": []string{"127.0.0.1", "::1"}}})
	wantGatewayError(t, send(t, g, "GET", "/ip/x", nil), 403, "")
}

// TestProxyCacheCookies: a request with Cookie bypasses the cache (its
// answer may be the cookie's session's), so a cookieless client never gets
// it; a response with Set-Cookie or Vary: Cookie is not stored;
// cache_cookie_requests lets cookie requests be cached.
func TestProxyCacheCookies(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		switch r.URL.Path {
		case "/vary":
			w.Header().Set("Vary", "Accept-Encoding, cookie")
		case "/set":
			w.Header().Set("Set-Cookie", "session=new")
		}
		fmt.Fprintf(w, "for %q", r.Header.Get("Cookie"))
	})
	sid := g.Service("s", testgw.Addr(up))
	r := g.PathRoutes(sid, "/c", "/vary", "/set", "/opt")
	addPlugin(t, g, "proxy-cache", "service", sid, nil)
	addPlugin(t, g, "proxy-cache", "route", r[3], map[string]any{"cache_cookie_requests": true, "vary_headers": []string{"Cookie"}})

	get := func(path, status, body string, hdr ...string) {
		t.Helper()
		p := send(t, g, "GET", path, nil, hdr...)
		if p.Status != 200 || p.Header.Get("X-Cache-Status") != status || p.Body != body {
			t.Fatalf("%s %v: %d %s %q; want %s %q", path, hdr, p.Status, p.Header.Get("X-Cache-Status"), p.Body, status, body)
		}
	}
	get("/c", "Bypass", `for "session=alice"`, "Cookie", "session=alice")
	get("/c", "Miss", `for ""`)
	get("/c", "Bypass", `for "session=bob"`, "Cookie", "session=bob")
	get("/c", "Hit", `for ""`)
	for _, status := range []string{"Bypass", "Bypass"} {
		get("/vary", status, `for ""`)
		get("/set", status, `for ""`)
	}
	get("/opt", "Miss", `for "session=alice"`, "Cookie", "session=alice")
	get("/opt", "Hit", `for "session=alice"`, "Cookie", "session=alice")
	get("/opt", "Miss", `for "session=bob"`, "Cookie", "session=bob")
	get("/opt", "Miss", `for ""`)
}
