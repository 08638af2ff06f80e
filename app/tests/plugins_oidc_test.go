package tests

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestPluginOpenIDConnectThroughGateway: an openid-connect plugin made
// through the admin API verifies a provider's tokens, maps the subject to
// a consumer for acl, keeps the provider's key set across configuration
// changes (no fetch per change), and anonymous composes with key-auth.
func TestPluginOpenIDConnectThroughGateway(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var jwksHits atomic.Int64
	var op *httptest.Server
	op = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": op.URL, "jwks_uri": op.URL + "/jwks",
				"authorization_endpoint": op.URL + "/auth", "token_endpoint": op.URL + "/token",
				"id_token_signing_alg_values_supported": []string{"RS256"}})
		case "/jwks":
			jwksHits.Add(1)
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer op.Close()
	token := func(sub string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": op.URL, "aud": "api", "sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	g, sid := echoGateway(t)
	r := g.PathRoutes(sid, "/api", "/any")
	api, anyOf := r[0], r[1]
	oidcCfg := map[string]any{"issuer": op.URL, "client_id": "api", "bearer_only": true}
	addPlugin(t, g, "openid-connect", "route", api, oidcCfg)
	addPlugin(t, g, "acl", "route", api, map[string]any{"allow": []string{"staff"}})
	g.Must("POST", "/api/v1/consumers", map[string]any{"username": "dave", "groups": []string{"staff"}})
	g.Consumer("guest")
	g.Consumer("erin", map[string]any{"type": "key-auth", "key": "erin-key"})

	p := send(t, g, "GET", "/api", nil, "Authorization", "Bearer "+token("dave"), "X-Anonymous-Consumer", "true")
	if e := testgw.DecodeEcho(t, p.Body); p.Status != 200 || e.Headers["X-Consumer-Username"][0] != "dave" || e.Headers["X-Anonymous-Consumer"] != nil {
		t.Fatalf("dave's token: %d %s", p.Status, p.Body)
	}
	wantGatewayError(t, send(t, g, "GET", "/api", nil, "Authorization", "Bearer "+token("mallory")), 403, "") // no consumer: acl
	p = send(t, g, "GET", "/api", nil, "Authorization", "Bearer "+token("dave")+"x")
	if p.Status != 401 || !strings.Contains(p.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("bad signature: %d %q", p.Status, p.Header.Get("WWW-Authenticate"))
	}

	// Configuration changes (new plugins on another route) keep the
	// provider's key set: no fetch.
	hits := jwksHits.Load()
	addPlugin(t, g, "key-auth", "route", anyOf, map[string]any{"anonymous": "guest"})
	anyCfg := map[string]any{"anonymous": "guest"}
	for k, v := range oidcCfg {
		anyCfg[k] = v
	}
	addPlugin(t, g, "openid-connect", "route", anyOf, anyCfg)
	if p := send(t, g, "GET", "/api", nil, "Authorization", "Bearer "+token("dave")); p.Status != 200 {
		t.Fatalf("after changes: %d", p.Status)
	}
	if n := jwksHits.Load(); n != hits {
		t.Fatalf("key set fetched %d more times across configuration changes", n-hits)
	}

	// key-auth or openid-connect, else the anonymous consumer.
	for _, tc := range []struct {
		hdr        []string
		status     int
		user, anon string
	}{
		{[]string{"apikey", "erin-key"}, 200, "erin", ""},
		{[]string{"Authorization", "Bearer " + token("dave")}, 200, "dave", ""},
		{[]string{"X-Anonymous-Consumer", "false"}, 200, "guest", "true"},
		{[]string{"apikey", "wrong"}, 401, "", ""},
		{[]string{"Authorization", "Bearer x.y.z"}, 401, "", ""},
	} {
		p := send(t, g, "GET", "/any", nil, tc.hdr...)
		if p.Status != tc.status {
			t.Fatalf("%v: %d, want %d: %s", tc.hdr, p.Status, tc.status, p.Body)
		}
		if tc.status != 200 {
			continue
		}
		e := testgw.DecodeEcho(t, p.Body)
		var anon string
		if v := e.Headers["X-Anonymous-Consumer"]; len(v) > 0 {
			anon = v[0]
		}
		if e.Headers["X-Consumer-Username"][0] != tc.user || anon != tc.anon {
			t.Fatalf("%v: consumer %v, anonymous %q", tc.hdr, e.Headers["X-Consumer-Username"], anon)
		}
	}
}
