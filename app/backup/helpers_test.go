package backup_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// start runs a fresh gateway (its plugins' process-wide state starts
// fresh: the previous gateway's instances released theirs when it stopped).
func start(t *testing.T, opts *testgw.Options) *testgw.Gateway {
	t.Helper()
	return testgw.Start(t, opts)
}

// stop stops the running gateway (a later start may reuse or replace its store).
func stop(t *testing.T) {
	t.Helper()
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
}

// followProxy points g at the HTTP proxy listener the gateway now serves
// (settings may have moved it).
func followProxy(g *testgw.Gateway) {
	if cp := controlplane.Current(); cp != nil {
		if a := cp.ProxyAddr(false); a != "" {
			g.ProxyAddr, g.ProxyURL = a, "http://"+a
		}
	}
}

type reply struct {
	Status   int
	Name     string
	Consumer string
	Header   http.Header
}

// get sends a proxied GET with headers as name, value pairs.
func get(t *testing.T, g *testgw.Gateway, path string, hdr ...string) reply {
	t.Helper()
	a := g.Proxy(t, "GET", path, nil, hdr...)
	out := reply{Status: a.Status, Header: a.Header}
	if a.Status == 200 {
		e := testgw.DecodeEcho(t, a.Body)
		out.Name, out.Consumer = e.Name, e.Headers.Get("X-Consumer-Username")
	}
	return out
}

func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

func sign(t *testing.T, method jwt.SigningMethod, iss string, key any) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, jwt.MapClaims{"iss": iss, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func id(v map[string]any) int64 { return testgw.ID(v) }

func p(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// fixture is the configuration built by build.
type fixture struct {
	rsaKey     *rsa.PrivateKey
	streamAddr string
}

const (
	jwtSecret   = "s3cr3t-jwt-value"
	basicPass   = "hunter2-pass"
	aliceKey    = "alice-key-0123456789"
	bobKey      = "bob-key-0123456789"
	consumerCID = "b-1"
)

// build creates services (ids not starting at 1, so an import must remap
// them), targets, routes (one with splits), route, service and global
// plugins, consumers with key-auth, basic-auth and jwt credentials and a
// stream route.
func build(t *testing.T, g *testgw.Gateway) fixture {
	t.Helper()
	// Burn ids: the document's ids then differ from a fresh store's.
	gone := g.Service("gone")
	g.Must("DELETE", p("/api/v1/services/%d", gone), nil)
	goneC := id(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "gone"}))
	g.Must("DELETE", p("/api/v1/consumers/%d", goneC), nil)

	a := g.Service("svc-a", testgw.Addr(testgw.Echo(t, "a")))
	b := g.Service("svc-b", testgw.Addr(testgw.Echo(t, "b")))
	c := g.Service("svc-tcp", testgw.TCPEcho(t, "tcp"))
	g.Route("split", a, map[string]any{"paths": []string{"/split"}, "splits": []map[string]any{{"service_id": a, "weight": 1}, {"service_id": b, "weight": 1}}})
	ka := g.Route("ka", a, map[string]any{"paths": []string{"/ka"}})
	ba := g.Route("ba", a, map[string]any{"paths": []string{"/ba"}})
	jw := g.Route("jw", b, map[string]any{"paths": []string{"/jw"}})
	g.Route("open-b", b, map[string]any{"paths": []string{"/b"}, "strip_path": true})
	for _, pl := range []map[string]any{
		{"type": "key-auth", "scope": "route", "route_id": ka},
		{"type": "basic-auth", "scope": "route", "route_id": ba},
		{"type": "jwt", "scope": "route", "route_id": jw},
		{"type": "response-transform", "scope": "service", "service_id": b, "config": map[string]any{"set_headers": map[string]string{"X-Service": "b"}}},
		{"type": "request-id", "scope": "global"},
	} {
		g.Must("POST", "/api/v1/plugins", pl)
	}
	alice := id(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "alice", "groups": []string{"ops"}}))
	bob := id(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "bob", "custom_id": consumerCID}))
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	for _, cr := range []struct {
		consumer int64
		body     map[string]any
	}{
		{alice, map[string]any{"type": "key-auth", "key": aliceKey}},
		{alice, map[string]any{"type": "basic-auth", "username": "alice", "password": basicPass}},
		{alice, map[string]any{"type": "jwt", "key": "iss-alice", "secret": jwtSecret}},
		{alice, map[string]any{"type": "jwt", "key": "iss-rsa", "algorithm": "RS256", "public_key": pub}},
		{bob, map[string]any{"type": "key-auth", "key": bobKey}},
	} {
		g.Must("POST", p("/api/v1/consumers/%d/credentials", cr.consumer), cr.body)
	}
	streamAddr := testgw.FreeAddr(t)
	g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "tcp", "listen_addr": streamAddr, "service_id": c})
	return fixture{rsaKey: rsaKey, streamAddr: streamAddr}
}

// checkTraffic checks that the fixture's routes, splits, plugins and
// credentials all work through the proxy.
func checkTraffic(t *testing.T, g *testgw.Gateway, f fixture) {
	t.Helper()
	seen := map[string]bool{}
	for i := 0; i < 40 && len(seen) < 2; i++ {
		r := get(t, g, "/split")
		if r.Status != 200 {
			t.Fatalf("/split: %d", r.Status)
		}
		seen[r.Name] = true
	}
	if !seen["a"] || !seen["b"] {
		t.Fatalf("splits reached %v, want a and b", seen)
	}
	if r := get(t, g, "/b/x"); r.Status != 200 || r.Name != "b" || r.Header.Get("X-Service") != "b" || r.Header.Get("X-Request-ID") == "" {
		t.Fatalf("/b: %+v", r)
	}
	if r := get(t, g, "/ka"); r.Status != 401 {
		t.Fatalf("key-auth without a key: %d", r.Status)
	}
	if r := get(t, g, "/ka", "apikey", aliceKey); r.Status != 200 || r.Consumer != "alice" {
		t.Fatalf("key-auth alice: %+v", r)
	}
	if r := get(t, g, "/ka", "apikey", bobKey); r.Status != 200 || r.Consumer != "bob" {
		t.Fatalf("key-auth bob: %+v", r)
	}
	if r := get(t, g, "/ba", "Authorization", basic("alice", "wrong")); r.Status != 401 {
		t.Fatalf("basic-auth with a wrong password: %d", r.Status)
	}
	if r := get(t, g, "/ba", "Authorization", basic("alice", basicPass)); r.Status != 200 || r.Consumer != "alice" {
		t.Fatalf("basic-auth: %+v", r)
	}
	if r := get(t, g, "/jw", "Authorization", "Bearer "+sign(t, jwt.SigningMethodHS256, "iss-alice", []byte("wrong"))); r.Status != 401 {
		t.Fatalf("jwt with a wrong secret: %d", r.Status)
	}
	if r := get(t, g, "/jw", "Authorization", "Bearer "+sign(t, jwt.SigningMethodHS256, "iss-alice", []byte(jwtSecret))); r.Status != 200 || r.Consumer != "alice" || r.Name != "b" {
		t.Fatalf("jwt HS256: %+v", r)
	}
	if r := get(t, g, "/jw", "Authorization", "Bearer "+sign(t, jwt.SigningMethodRS256, "iss-rsa", f.rsaKey)); r.Status != 200 || r.Consumer != "alice" {
		t.Fatalf("jwt RS256: %+v", r)
	}
}

// wantError sends a request that must fail with status and an error
// containing every fragment.
func wantError(t *testing.T, g *testgw.Gateway, status int, method, path string, body any, fragments ...string) string {
	t.Helper()
	st, b := g.Do(method, path, body)
	if st != status {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, status, b)
	}
	var e struct{ Error string }
	if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
		t.Fatalf("%s %s: not an error body: %s", method, path, b)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Error, f) {
			t.Fatalf("%s %s: error %q lacks %q", method, path, e.Error, f)
		}
	}
	return e.Error
}

// export reads an export document (raw and decoded).
func export(t *testing.T, g *testgw.Gateway, secrets bool) ([]byte, map[string]any) {
	t.Helper()
	path := "/api/v1/export"
	if secrets {
		path += "?include_secrets=true"
	}
	st, raw := g.Do("GET", path, nil)
	if st != 200 {
		t.Fatalf("GET %s: %d %s", path, st, raw)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return raw, doc
}

type report struct {
	Restored map[string]int `json:"restored"`
	Skipped  []struct {
		Kind, Ref, Reason string
	} `json:"skipped"`
}

func importDoc(t *testing.T, g *testgw.Gateway, doc any) report {
	t.Helper()
	st, b := g.Do("POST", "/api/v1/import", doc)
	if st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}
