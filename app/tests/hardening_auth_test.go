package tests

import (
	"bufio"
	"encoding/base64"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestJWTTimeClaimsWhenPresent: exp and nbf are honoured whenever a token
// carries them (RFC 7519 4.1.4, 4.1.5), listed in claims_to_verify or not,
// within leeway_s.
func TestJWTTimeClaimsWhenPresent(t *testing.T) {
	g, sid := echoGateway(t)
	r := g.PathRoutes(sid, "/def", "/none", "/lee")
	addPlugin(t, g, "jwt", "route", r[0], nil)
	addPlugin(t, g, "jwt", "route", r[1], map[string]any{"claims_to_verify": []string{}})
	addPlugin(t, g, "jwt", "route", r[2], map[string]any{"leeway_s": 60})
	g.Consumer("dave", map[string]any{"type": "jwt", "key": "hs-iss", "secret": "hs-secret"})
	now := time.Now()
	tok := func(claims jwt.MapClaims) string {
		claims["iss"] = "hs-iss"
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("hs-secret"))
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	exp := now.Add(time.Hour).Unix()
	status := func(path string, claims jwt.MapClaims) int {
		t.Helper()
		return send(t, g, "GET", path, nil, "Authorization", tok(claims)).Status
	}
	for _, tc := range []struct {
		path   string
		claims jwt.MapClaims
		want   int
	}{
		{"/def", jwt.MapClaims{"exp": exp}, 200},
		{"/def", jwt.MapClaims{"exp": exp, "nbf": now.Add(-time.Minute).Unix()}, 200},
		{"/def", jwt.MapClaims{"exp": exp, "nbf": now.Add(time.Hour).Unix()}, 401},
		{"/def", jwt.MapClaims{"exp": exp, "nbf": now.Add(10 * time.Second).Unix()}, 401},
		{"/none", jwt.MapClaims{}, 200},
		{"/none", jwt.MapClaims{"nbf": now.Add(time.Hour).Unix()}, 401},
		{"/none", jwt.MapClaims{"exp": now.Add(-time.Hour).Unix()}, 401},
		{"/lee", jwt.MapClaims{"exp": exp, "nbf": now.Add(10 * time.Second).Unix()}, 200},
		{"/lee", jwt.MapClaims{"exp": now.Add(-10 * time.Second).Unix()}, 200},
		{"/lee", jwt.MapClaims{"exp": exp, "nbf": now.Add(5 * time.Minute).Unix()}, 401},
		{"/lee", jwt.MapClaims{"exp": now.Add(-5 * time.Minute).Unix()}, 401},
	} {
		if got := status(tc.path, tc.claims); got != tc.want {
			t.Errorf("%s %v: %d, want %d", tc.path, tc.claims, got, tc.want)
		}
	}
	p := send(t, g, "GET", "/none", nil, "Authorization", tok(jwt.MapClaims{"nbf": now.Add(time.Hour).Unix()}))
	wantGatewayError(t, p, 401, "token not valid yet")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "jwt", "scope": "global", "config": map[string]any{"leeway_s": 301}}, "config.leeway_s")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "jwt", "scope": "global", "config": map[string]any{"leeway_s": -1}}, "config.leeway_s")
}

// TestCredentialHeaders: a client's X-Credential-Identifier and
// X-Anonymous-Consumer never reach the upstream (with or without an auth
// plugin, in '_' spellings too); an authenticated request carries the
// credential's identifier as Kong sets it: a key-auth credential's id,
// a basic-auth credential's username, a jwt credential's key.
func TestCredentialHeaders(t *testing.T) {
	g, sid := echoGateway(t)
	r := g.PathRoutes(sid, "/ka", "/ba", "/jwt", "/open")
	addPlugin(t, g, "key-auth", "route", r[0], nil)
	addPlugin(t, g, "basic-auth", "route", r[1], nil)
	addPlugin(t, g, "jwt", "route", r[2], nil)
	c := g.Consumer("bob")
	creds := "/api/v1/consumers/" + itoa(c) + "/credentials"
	keyCred := testgw.ID(g.Must("POST", creds, map[string]any{"type": "key-auth", "key": "bob-key"}))
	g.Must("POST", creds, map[string]any{"type": "basic-auth", "username": "bob-basic", "password": "bob-password"})
	g.Must("POST", creds, map[string]any{"type": "jwt", "key": "bob-iss", "secret": "bob-secret"})
	jwtTok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "bob-iss", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("bob-secret"))
	if err != nil {
		t.Fatal(err)
	}
	forged := []string{"X-Credential-Identifier", "forged", "X-Anonymous-Consumer", "true", "X_Credential_Identifier", "forged2", "x_anonymous_consumer", "true"}
	for _, tc := range []struct {
		path, want string
		auth       []string
	}{
		{"/ka", itoa(keyCred), []string{"apikey", "bob-key"}},
		{"/ba", "bob-basic", []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("bob-basic:bob-password"))}},
		{"/jwt", "bob-iss", []string{"Authorization", "Bearer " + jwtTok}},
		{"/open", "", nil},
	} {
		p := send(t, g, "GET", tc.path, nil, append(tc.auth, forged...)...)
		if p.Status != 200 {
			t.Fatalf("%s: %d %s", tc.path, p.Status, p.Body)
		}
		e := testgw.DecodeEcho(t, p.Body)
		if got := e.Headers.Values("X-Credential-Identifier"); (tc.want == "" && len(got) != 0) || (tc.want != "" && (len(got) != 1 || got[0] != tc.want)) {
			t.Errorf("%s: X-Credential-Identifier %q, want %q", tc.path, got, tc.want)
		}
		for k, v := range e.Headers {
			if strings.EqualFold(k, "X-Anonymous-Consumer") || strings.Contains(k, "_") {
				t.Errorf("%s: %s: %v reached the upstream", tc.path, k, v)
			}
		}
	}
}

// TestConnectRefused: CONNECT, with a valid key, on a route that does not
// list it in its methods is 405 and never reaches the upstream (which,
// plain HTTP, would get a tunnel request it cannot mean to serve); a
// route that lists CONNECT proxies it.
func TestConnectRefused(t *testing.T) {
	g := testgw.Start(t, nil)
	var (
		mu  sync.Mutex
		got []string
	)
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.WriteHeader(200)
	})
	sid := g.Service("s", testgw.Addr(up))
	all := g.Route("all", sid, nil)
	addPlugin(t, g, "key-auth", "route", all, nil)
	g.Consumer("bob", map[string]any{"type": "key-auth", "key": "bob-key"})
	g.Route("tunnel", sid, map[string]any{"paths": []string{"/tunnel"}, "methods": []string{"CONNECT"}})

	connect := func(target string) (int, http.Header) {
		t.Helper()
		conn, err := net.Dial("tcp", g.ProxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte("CONNECT " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\napikey: bob-key\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "CONNECT"})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	for _, target := range []string{"/x", "127.0.0.1:80"} {
		st, h := connect(target)
		if st != 405 || h.Get("Allow") == "" || strings.Contains(h.Get("Allow"), "CONNECT") {
			t.Errorf("CONNECT %s: %d, Allow %q; want 405 with an Allow without CONNECT", target, st, h.Get("Allow"))
		}
	}
	if got := seen(); len(got) != 0 {
		t.Fatalf("the upstream got %v", got)
	}
	if p := send(t, g, "GET", "/x", nil, "apikey", "bob-key"); p.Status != 200 {
		t.Fatalf("GET: %d %s", p.Status, p.Body)
	}
	if st, _ := connect("/tunnel"); st != 200 || !slices.Contains(seen(), "CONNECT /tunnel") {
		t.Fatalf("CONNECT on a route that lists it: %d, upstream got %v", st, seen())
	}
}
