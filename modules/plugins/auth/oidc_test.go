package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// testOP is the tests' own OpenID provider, for what a real one does not do
// on demand: rotate its key mid-test, list odd algorithms, serve a broken
// discovery document. It signs tokens itself (Sign).
type testOP struct {
	*httptest.Server
	mu        sync.Mutex
	key       *rsa.PrivateKey
	kid       string
	algs      []string
	discovery func(w http.ResponseWriter) bool // true: answered
	jwksHits  atomic.Int64
	introHits atomic.Int64
}

func newTestOP(t *testing.T) *testOP {
	t.Helper()
	op := &testOP{algs: []string{"RS256"}}
	op.rotate(t)
	op.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op.mu.Lock()
		defer op.mu.Unlock()
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			if op.discovery != nil && op.discovery(w) {
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"issuer": op.URL, "authorization_endpoint": op.URL + "/auth", "token_endpoint": op.URL + "/token",
				"jwks_uri": op.URL + "/jwks", "id_token_signing_alg_values_supported": op.algs,
				"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
				"introspection_endpoint": op.URL + "/introspect",
			})
		case "/jwks":
			op.jwksHits.Add(1)
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
				{Key: &op.key.PublicKey, KeyID: op.kid, Algorithm: "RS256", Use: "sig"},
			}})
		case "/introspect":
			op.introHits.Add(1)
			if u, p, ok := r.BasicAuth(); !ok || u != "api" || p != "api-secret" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			switch r.PostFormValue("token") {
			case "opaque-good":
				_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "alice", "scope": "read", "exp": time.Now().Add(time.Hour).Unix()})
			case "opaque-other-aud":
				_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "alice", "aud": "other", "exp": time.Now().Add(time.Hour).Unix()})
			case "opaque-expired":
				_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()})
			default:
				_ = json.NewEncoder(w).Encode(map[string]any{"active": false})
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(op.Close)
	return op
}

// rotate replaces the signing key (and its kid).
func (op *testOP) rotate(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	op.mu.Lock()
	op.key, op.kid = k, fmt.Sprintf("k%d", time.Now().UnixNano())
	op.mu.Unlock()
}

// claims are valid claims for client "api", changed by mods.
func (op *testOP) claims(mods map[string]any) jwt.MapClaims {
	c := jwt.MapClaims{"iss": op.URL, "aud": "api", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "scope": "openid read"}
	for k, v := range mods {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign signs claims with the current key (RS256, its kid).
func (op *testOP) sign(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	op.mu.Lock()
	key, kid := op.key, op.kid
	op.mu.Unlock()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func oidcHandler(t *testing.T, op *testOP, cfg map[string]any) map[string]any {
	m := with("gateway_openid_connect", map[string]any{"issuer": op.URL, "client_id": "api", "bearer_only": true}, t)
	for k, v := range cfg {
		m[k] = v
	}
	return m
}

func get(t *testing.T, g *plugintest.Gateway, path string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.URL+path, nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, b.String()
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// Bearer JWTs are verified against the discovered key set, with iss, aud,
// exp, nbf (leeway 60 s) and the provider's algorithms; the claim maps to
// a consumer by username, then custom_id.
func TestOIDCBearerJWT(t *testing.T) {
	op := newTestOP(t)
	g := plugintest.Start(t, []any{oidcHandler(t, op, map[string]any{
		"scopes_required": []string{"read"}, "upstream_headers": []string{"X-Userinfo", "X-Access-Token"},
	})})

	tok := op.sign(t, op.claims(nil))
	resp, _ := get(t, g, "/", map[string]string{"Authorization": "Bearer " + tok, "X-Userinfo": "forged"})
	if resp.StatusCode != 200 {
		t.Fatalf("valid token: %d", resp.StatusCode)
	}
	up := g.Upstream.Last()
	if up.Header.Get("X-Consumer-Username") != "alice" || up.Header.Get("X-Access-Token") != tok {
		t.Fatalf("upstream headers: %v", up.Header)
	}
	info, err := base64.RawURLEncoding.DecodeString(up.Header.Get("X-Userinfo"))
	if err != nil || !strings.Contains(string(info), `"sub":"alice"`) {
		t.Fatalf("X-Userinfo %q: %v", up.Header.Get("X-Userinfo"), err)
	}

	// custom_id maps too (alice's is c-alice); an unknown subject passes
	// without a consumer.
	if resp, _ := get(t, g, "/", bearer(op.sign(t, op.claims(map[string]any{"sub": "c-alice"})))); resp.StatusCode != 200 || g.Upstream.Last().Header.Get("X-Consumer-Username") != "alice" {
		t.Fatalf("custom_id: %d %v", resp.StatusCode, g.Upstream.Last().Header)
	}
	if resp, _ := get(t, g, "/", bearer(op.sign(t, op.claims(map[string]any{"sub": "nobody"})))); resp.StatusCode != 200 || g.Upstream.Last().Header.Get("X-Consumer-Username") != "" {
		t.Fatalf("unknown subject: %d", resp.StatusCode)
	}
	// Within the leeway.
	if resp, _ := get(t, g, "/", bearer(op.sign(t, op.claims(map[string]any{"exp": time.Now().Add(-20 * time.Second).Unix(), "nbf": time.Now().Add(20 * time.Second).Unix()})))); resp.StatusCode != 200 {
		t.Fatalf("clock skew within leeway: %d", resp.StatusCode)
	}

	// HS256 with the provider's public key as the secret.
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, op.claims(nil))
	hs.Header["kid"] = op.kid
	hsTok, _ := hs.SignedString([]byte(`{"kty":"RSA"}`))
	none := jwt.NewWithClaims(jwt.SigningMethodNone, op.claims(nil))
	noneTok, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	forged := jwt.NewWithClaims(jwt.SigningMethodRS256, op.claims(nil))
	forged.Header["kid"] = op.kid
	forgedTok, _ := forged.SignedString(other)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	esTok, _ := jwt.NewWithClaims(jwt.SigningMethodES256, op.claims(nil)).SignedString(ec)

	for name, tok := range map[string]string{
		"other audience":   op.sign(t, op.claims(map[string]any{"aud": "someone-else"})),
		"other issuer":     op.sign(t, op.claims(map[string]any{"iss": "https://evil.example"})),
		"expired":          op.sign(t, op.claims(map[string]any{"exp": time.Now().Add(-2 * time.Minute).Unix()})),
		"no exp":           op.sign(t, op.claims(map[string]any{"exp": nil})),
		"exp as string":    op.sign(t, op.claims(map[string]any{"exp": "never"})),
		"not yet valid":    op.sign(t, op.claims(map[string]any{"nbf": time.Now().Add(5 * time.Minute).Unix()})),
		"alg none":         noneTok,
		"HS256":            hsTok,
		"wrong key":        forgedTok,
		"ES256 not listed": esTok,
		"opaque":           "opaque-token-value",
		"garbage":          "a.b.c",
		"oversized":        op.sign(t, op.claims(map[string]any{"pad": strings.Repeat("x", 13000)})),
	} {
		resp, _ := get(t, g, "/", bearer(tok))
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s: %d %q, want 401 invalid_token", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}

	resp, _ = get(t, g, "/", bearer(op.sign(t, op.claims(map[string]any{"scope": "openid"}))))
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Errorf("missing scope: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	resp, _ = get(t, g, "/", nil)
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// Tokens with forged key ids cost the provider one key set fetch per
// interval, however many arrive; a rotated key is picked up by the first
// token naming it once the interval has passed.
func TestOIDCKeyRotationAndForgedKids(t *testing.T) {
	op := newTestOP(t)
	g := plugintest.Start(t, []any{oidcHandler(t, op, nil)})
	if resp, _ := get(t, g, "/", bearer(op.sign(t, op.claims(nil)))); resp.StatusCode != 200 {
		t.Fatalf("valid token: %d", resp.StatusCode)
	}
	before := op.jwksHits.Load()
	for i := range 50 {
		c := op.claims(nil)
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
		tok.Header["kid"] = fmt.Sprintf("forged-%d", i)
		s, _ := tok.SignedString(op.key)
		if resp, _ := get(t, g, "/", bearer(s)); resp.StatusCode != 401 {
			t.Fatalf("forged kid: %d", resp.StatusCode)
		}
	}
	// The key set was fetched just now (discovery): no refetch within
	// the interval, whatever the kids.
	if n := op.jwksHits.Load() - before; n > 1 {
		t.Fatalf("%d key set fetches for 50 forged kids", n)
	}

	op.rotate(t)
	rotated := op.sign(t, op.claims(nil))
	old := jwksRefetchInterval
	jwksRefetchInterval = 0
	t.Cleanup(func() { jwksRefetchInterval = old })
	if resp, _ := get(t, g, "/", bearer(rotated)); resp.StatusCode != 200 {
		t.Fatalf("token of the rotated key: %d", resp.StatusCode)
	}
}

// A discovery document that is broken, names another issuer, or lists no
// usable algorithm: 503 (provider unusable) or 401, never a token
// accepted with an algorithm the provider did not list.
func TestOIDCBadDiscovery(t *testing.T) {
	oldRetry := providerRetry
	providerRetry = 0
	t.Cleanup(func() { providerRetry = oldRetry })
	for name, tc := range map[string]struct {
		discovery func(op *testOP) func(w http.ResponseWriter) bool
		status    int
	}{
		"malformed": {func(*testOP) func(http.ResponseWriter) bool {
			return func(w http.ResponseWriter) bool { _, _ = w.Write([]byte(`{"issuer": `)); return true }
		}, 503},
		"other issuer": {func(*testOP) func(http.ResponseWriter) bool {
			return func(w http.ResponseWriter) bool {
				_, _ = w.Write([]byte(`{"issuer":"https://evil.example","jwks_uri":"https://evil.example/jwks"}`))
				return true
			}
		}, 503},
		"huge": {func(*testOP) func(http.ResponseWriter) bool {
			return func(w http.ResponseWriter) bool {
				_, _ = w.Write([]byte(`{"issuer":"` + strings.Repeat("a", 2<<20) + `"}`))
				return true
			}
		}, 503},
		"jwks_uri not http": {func(op *testOP) func(http.ResponseWriter) bool {
			return func(w http.ResponseWriter) bool {
				_ = json.NewEncoder(w).Encode(map[string]any{"issuer": op.URL, "jwks_uri": "file:///etc/passwd", "authorization_endpoint": op.URL + "/a", "token_endpoint": op.URL + "/t"})
				return true
			}
		}, 503},
		"only HS256 and none listed": {func(op *testOP) func(http.ResponseWriter) bool {
			op.algs = []string{"HS256", "none"}
			return nil // falls back to RS256: the token verifies
		}, 200},
		"only ES256 listed": {func(op *testOP) func(http.ResponseWriter) bool {
			op.algs = []string{"ES256"}
			return nil
		}, 401},
	} {
		t.Run(name, func(t *testing.T) {
			op := newTestOP(t)
			op.discovery = tc.discovery(op)
			g := plugintest.Start(t, []any{oidcHandler(t, op, nil)})
			if resp, _ := get(t, g, "/", bearer(op.sign(t, op.claims(nil)))); resp.StatusCode != tc.status {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

// Opaque tokens are introspected (RFC 7662, as the client) and the
// answers cached: an active token's until its exp, an inactive one's
// briefly, so repeated requests cost the provider one call each.
func TestOIDCIntrospection(t *testing.T) {
	op := newTestOP(t)
	g := plugintest.Start(t, []any{oidcHandler(t, op, map[string]any{"introspection": true, "client_secret": "api-secret"})})
	for range 3 {
		if resp, _ := get(t, g, "/", bearer("opaque-good")); resp.StatusCode != 200 || g.Upstream.Last().Header.Get("X-Consumer-Username") != "alice" {
			t.Fatalf("active token: %d", resp.StatusCode)
		}
		if resp, _ := get(t, g, "/", bearer("opaque-revoked")); resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "invalid_token") {
			t.Fatalf("inactive token: %d", resp.StatusCode)
		}
	}
	if n := op.introHits.Load(); n != 2 {
		t.Fatalf("%d introspection requests for 2 tokens, want 2 (cached)", n)
	}
	for _, tok := range []string{"opaque-other-aud", "opaque-expired"} {
		if resp, _ := get(t, g, "/", bearer(tok)); resp.StatusCode != 401 {
			t.Fatalf("%s: %d", tok, resp.StatusCode)
		}
	}
	g2 := plugintest.Start(t, []any{oidcHandler(t, op, map[string]any{"introspection": true, "client_secret": "api-secret", "scopes_required": []string{"write"}})})
	if resp, _ := get(t, g2, "/", bearer("opaque-good")); resp.StatusCode != 403 {
		t.Fatalf("introspected scope missing: %d", resp.StatusCode)
	}
}
