package pluginapi_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/modules/plugins"
)

func plugin(t *testing.T, g *testgw.Gateway, body map[string]any) int64 {
	t.Helper()
	return id(g.Must("POST", "/api/v1/plugins", body))
}

func routePlugin(typ string, route int64, cfg map[string]any) map[string]any {
	b := map[string]any{"type": typ, "scope": "route", "route_id": route}
	if cfg != nil {
		b["config"] = cfg
	}
	return b
}

func wantStatus(t *testing.T, a answer, status int, what string) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, a.Status, status, a.Body)
	}
}

func TestAuthEndToEnd(t *testing.T) {
	need(t, "key-auth", "basic-auth", "jwt", "acl")
	g := start(t)
	svc := g.Service("svc", testgw.Addr(testgw.Echo(t, "up")))
	open := g.Route("open", svc, map[string]any{"paths": []string{"/open"}})
	ka := g.Route("ka", svc, map[string]any{"paths": []string{"/ka"}})
	ba := g.Route("ba", svc, map[string]any{"paths": []string{"/ba"}})
	jw := g.Route("jw", svc, map[string]any{"paths": []string{"/jw"}})
	_ = open
	plugin(t, g, routePlugin("key-auth", ka, nil))
	plugin(t, g, routePlugin("basic-auth", ba, nil))
	plugin(t, g, routePlugin("jwt", jw, nil))

	alice := id(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "alice", "custom_id": "a-1", "groups": []string{"g1", "g2"}}))
	bob := id(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "bob"}))
	key := g.Must("POST", p("/api/v1/consumers/%d/credentials", alice), map[string]any{"type": "key-auth", "key": "k-alice"})
	g.Must("POST", p("/api/v1/consumers/%d/credentials", bob), map[string]any{"type": "key-auth"})

	// Client-sent identity headers never reach the upstream.
	forged := []string{"X-Consumer-ID", "99", "X-Consumer-Username", "mallory", "X-Consumer-Custom-ID", "m", "X-Consumer-Groups", "root"}
	a := proxy(t, g, "GET", "/open", forged...)
	wantStatus(t, a, 200, "open route")
	for _, h := range []string{"X-Consumer-Id", "X-Consumer-Username", "X-Consumer-Custom-Id", "X-Consumer-Groups"} {
		if v, ok := a.echo(t).Headers[h]; ok {
			t.Fatalf("forged %s reached the upstream: %v", h, v)
		}
	}

	// key-auth
	wantStatus(t, proxy(t, g, "GET", "/ka"), 401, "key-auth without key")
	wantStatus(t, proxy(t, g, "GET", "/ka", "apikey", "wrong"), 401, "key-auth with a wrong key")
	wantAlice := func(a answer, what string) {
		t.Helper()
		wantStatus(t, a, 200, what)
		h := a.echo(t).Headers
		if got := h.Values("X-Consumer-Id"); len(got) != 1 || got[0] != p("%d", alice) {
			t.Fatalf("%s: X-Consumer-ID %v", what, got)
		}
		if got := h.Values("X-Consumer-Username"); len(got) != 1 || got[0] != "alice" {
			t.Fatalf("%s: X-Consumer-Username %v", what, got)
		}
		if got := h.Values("X-Consumer-Custom-Id"); len(got) != 1 || got[0] != "a-1" {
			t.Fatalf("%s: X-Consumer-Custom-ID %v", what, got)
		}
		if got := h.Values("X-Consumer-Groups"); len(got) != 1 || got[0] != "g1,g2" {
			t.Fatalf("%s: X-Consumer-Groups %v", what, got)
		}
	}
	wantAlice(proxy(t, g, "GET", "/ka", append([]string{"apikey", "k-alice"}, forged...)...), "key-auth header")
	wantAlice(proxy(t, g, "GET", "/ka?apikey=k-alice"), "key-auth query")

	// A consumer change reaches the running proxy.
	g.Must("PUT", p("/api/v1/consumers/%d", alice), map[string]any{"username": "alice", "groups": []string{"g3"}})
	h := proxy(t, g, "GET", "/ka", "apikey", "k-alice").echo(t).Headers
	if h.Get("X-Consumer-Groups") != "g3" || h.Get("X-Consumer-Custom-Id") != "" {
		t.Fatalf("after consumer PUT: %v", h)
	}
	g.Must("PUT", p("/api/v1/consumers/%d", alice), map[string]any{"username": "alice", "custom_id": "a-1", "groups": []string{"g1", "g2"}})

	// acl on the same route: groups decide.
	acl := plugin(t, g, routePlugin("acl", ka, map[string]any{"allow": []string{"g1"}}))
	wantAlice(proxy(t, g, "GET", "/ka", "apikey", "k-alice"), "acl allowed")
	g.Must("PUT", p("/api/v1/plugins/%d", acl), routePlugin("acl", ka, map[string]any{"allow": []string{"ops"}}))
	wantStatus(t, proxy(t, g, "GET", "/ka", "apikey", "k-alice"), 403, "acl denied")
	g.Must("DELETE", p("/api/v1/plugins/%d", acl), nil)

	// A deleted credential stops working at once.
	g.Must("DELETE", p("/api/v1/credentials/%d", id(key)), nil)
	wantStatus(t, proxy(t, g, "GET", "/ka", "apikey", "k-alice"), 401, "deleted key")

	// basic-auth: the stored bcrypt hash verifies the password.
	g.Must("POST", p("/api/v1/consumers/%d/credentials", alice), map[string]any{"type": "basic-auth", "username": "alice", "password": "hunter2"})
	basic := func(user, pw string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
	}
	wantStatus(t, proxy(t, g, "GET", "/ba"), 401, "basic-auth without credentials")
	wantStatus(t, proxy(t, g, "GET", "/ba", "Authorization", basic("alice", "wrong")), 401, "basic-auth wrong password")
	wantAlice(proxy(t, g, "GET", "/ba", "Authorization", basic("alice", "hunter2")), "basic-auth")

	// jwt: HS256 with the stored secret, RS256 with the stored public key.
	g.Must("POST", p("/api/v1/consumers/%d/credentials", alice), map[string]any{"type": "jwt", "key": "iss-alice", "secret": "s3cr3t"})
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	g.Must("POST", p("/api/v1/consumers/%d/credentials", alice), map[string]any{"type": "jwt", "key": "iss-rsa", "algorithm": "RS256", "public_key": pemPublic(t, &rsaKey.PublicKey)})
	sign := func(method jwt.SigningMethod, iss string, key any) string {
		tok, err := jwt.NewWithClaims(method, jwt.MapClaims{"iss": iss, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	wantStatus(t, proxy(t, g, "GET", "/jw"), 401, "jwt without token")
	wantStatus(t, proxy(t, g, "GET", "/jw", "Authorization", "Bearer "+sign(jwt.SigningMethodHS256, "iss-alice", []byte("other"))), 401, "jwt wrong secret")
	wantAlice(proxy(t, g, "GET", "/jw", "Authorization", "Bearer "+sign(jwt.SigningMethodHS256, "iss-alice", []byte("s3cr3t"))), "jwt HS256")
	wantAlice(proxy(t, g, "GET", "/jw?jwt="+sign(jwt.SigningMethodRS256, "iss-rsa", rsaKey)), "jwt RS256")

	// Deleting the consumer removes its credentials from the proxy too.
	g.Must("DELETE", p("/api/v1/consumers/%d", alice), nil)
	wantStatus(t, proxy(t, g, "GET", "/ba", "Authorization", basic("alice", "hunter2")), 401, "deleted consumer")
}

func TestPluginPrecedence(t *testing.T) {
	need(t, "rate-limit")
	g := start(t)
	svc := g.Service("svc", testgw.Addr(testgw.Echo(t, "up")))
	one := g.Route("one", svc, map[string]any{"paths": []string{"/one"}})
	two := g.Route("two", svc, map[string]any{"paths": []string{"/two"}})
	other := g.Service("other", testgw.Addr(testgw.Echo(t, "up")))
	three := g.Route("three", other, map[string]any{"paths": []string{"/three"}})

	limit := func(path string) string {
		t.Helper()
		a := proxy(t, g, "GET", path)
		return a.Header.Get("RateLimit-Limit")
	}
	rl := func(n int) map[string]any { return map[string]any{"limit": n, "key": "global"} }

	plugin(t, g, map[string]any{"type": "rate-limit", "scope": "global", "config": rl(100)})
	if limit("/one") != "100" || limit("/three") != "100" {
		t.Fatal("the global rate-limit does not apply")
	}
	// Service over global.
	plugin(t, g, map[string]any{"type": "rate-limit", "scope": "service", "service_id": svc, "config": rl(50)})
	if limit("/one") != "50" || limit("/two") != "50" || limit("/three") != "100" {
		t.Fatalf("service scope: %s %s %s", limit("/one"), limit("/two"), limit("/three"))
	}
	// Route over service.
	plugin(t, g, routePlugin("rate-limit", one, rl(1)))
	if limit("/one") != "1" || limit("/two") != "50" {
		t.Fatal("route scope does not override")
	}
	wantStatus(t, proxy(t, g, "GET", "/one"), 429, "route limit exhausted")
	if a := proxy(t, g, "GET", "/two"); a.Status != 200 {
		t.Fatalf("other route limited: %d", a.Status)
	}

	// A disabled route plugin neither applies nor shadows the service one.
	body := routePlugin("rate-limit", two, rl(7))
	body["enabled"] = false
	disabled := plugin(t, g, body)
	if got := limit("/two"); got != "50" {
		t.Fatalf("disabled route plugin: limit %s, want the service's 50", got)
	}
	body["enabled"] = true
	g.Must("PUT", p("/api/v1/plugins/%d", disabled), body)
	if got := limit("/two"); got != "7" {
		t.Fatalf("enabled route plugin: limit %s, want 7", got)
	}

	// request-termination: a route instance overrides the global one.
	if _, ok := plugins.Lookup("request-termination"); !ok {
		t.Log("request-termination is not registered: its precedence is not tested")
		return
	}
	plugin(t, g, map[string]any{"type": "request-termination", "scope": "global", "config": map[string]any{}})
	rt := plugin(t, g, routePlugin("request-termination", three, map[string]any{"status": 418, "message": "teapot"}))
	a := proxy(t, g, "GET", "/two")
	if a.Status != 503 || !strings.Contains(a.Body, "service unavailable") {
		t.Fatalf("global termination: %d %s", a.Status, a.Body)
	}
	a = proxy(t, g, "GET", "/three")
	if a.Status != 418 || !strings.Contains(a.Body, "teapot") {
		t.Fatalf("route termination: %d %s", a.Status, a.Body)
	}
	b := routePlugin("request-termination", three, map[string]any{"status": 418})
	b["enabled"] = false
	g.Must("PUT", p("/api/v1/plugins/%d", rt), b)
	wantStatus(t, proxy(t, g, "GET", "/three"), 503, "disabled route termination")
}

func TestPluginOrderingAcrossScopes(t *testing.T) {
	need(t, "key-auth", "rate-limit")
	g := start(t)
	svc := g.Service("svc", testgw.Addr(testgw.Echo(t, "up")))
	early := g.Route("early", svc, map[string]any{"paths": []string{"/early"}})
	late := g.Route("late", svc, map[string]any{"paths": []string{"/late"}})
	// Global key-auth (ordering 500); route rate-limits before it (400) and
	// after it (default 700).
	plugin(t, g, map[string]any{"type": "key-auth", "scope": "global"})
	b := routePlugin("rate-limit", early, map[string]any{"limit": 1, "key": "global"})
	b["ordering"] = 400
	plugin(t, g, b)
	plugin(t, g, routePlugin("rate-limit", late, map[string]any{"limit": 1, "key": "global"}))

	a := proxy(t, g, "GET", "/early")
	if a.Status != 401 || a.Header.Get("RateLimit-Limit") != "1" {
		t.Fatalf("rate-limit should run before key-auth: %d %v", a.Status, a.Header)
	}
	wantStatus(t, proxy(t, g, "GET", "/early"), 429, "rate-limit first counts unauthenticated requests")
	for i := 0; i < 3; i++ {
		a = proxy(t, g, "GET", "/late")
		if a.Status != 401 || a.Header.Get("RateLimit-Limit") != "" {
			t.Fatalf("key-auth should run before rate-limit: %d %v", a.Status, a.Header)
		}
	}
	// A service plugin ordered between them: request-id (default 100) moved
	// to 450 still runs before key-auth rejects the request.
	if _, ok := plugins.Lookup("request-id"); ok {
		b := map[string]any{"type": "request-id", "scope": "service", "service_id": svc, "ordering": 450}
		rid := plugin(t, g, b)
		a = proxy(t, g, "GET", "/late")
		if a.Status != 401 || a.Header.Get("X-Request-Id") == "" {
			t.Fatalf("service request-id (450) before global key-auth (500): %d %v", a.Status, a.Header)
		}
		b["ordering"] = 600
		g.Must("PUT", p("/api/v1/plugins/%d", rid), b)
		a = proxy(t, g, "GET", "/late")
		if a.Status != 401 || a.Header.Get("X-Request-Id") != "" {
			t.Fatalf("service request-id (600) after global key-auth (500): %d %v", a.Status, a.Header)
		}
	}
}

func TestCachePurge(t *testing.T) {
	g := start(t)
	var got map[string]any
	if st := g.JSON("POST", "/api/v1/cache/purge", nil, &got); st != 200 || len(got) != 1 || got["purged"] != 0.0 {
		t.Fatalf("purge of an empty cache: %d %v", st, got)
	}
	if _, ok := plugins.Lookup("proxy-cache"); !ok {
		t.Skip("proxy-cache is not registered")
	}
	var hits atomic.Int64
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"n": hits.Add(1)})
	})
	svc := g.Service("svc", strings.TrimPrefix(up.URL, "http://"))
	g.Route("r", svc, nil)
	plugin(t, g, map[string]any{"type": "proxy-cache", "scope": "service", "service_id": svc})

	for _, path := range []string{"/a", "/b"} {
		if a := proxy(t, g, "GET", path); a.Header.Get("X-Cache-Status") != "Miss" {
			t.Fatalf("first GET %s: %v", path, a.Header)
		}
	}
	a := proxy(t, g, "GET", "/a")
	if a.Header.Get("X-Cache-Status") != "Hit" || hits.Load() != 2 {
		t.Fatalf("second GET: %v (upstream hits %d)", a.Header, hits.Load())
	}
	if st := g.JSON("POST", "/api/v1/cache/purge", nil, &got); st != 200 || got["purged"] != 2.0 {
		t.Fatalf("purge: %d %v", st, got)
	}
	if a := proxy(t, g, "GET", "/a"); a.Header.Get("X-Cache-Status") != "Miss" || hits.Load() != 3 {
		t.Fatalf("after purge: %v (upstream hits %d)", a.Header, hits.Load())
	}
}
