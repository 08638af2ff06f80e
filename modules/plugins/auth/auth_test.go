package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// The in-process Caddy of these tests is plugintest's.
func TestMain(m *testing.M) { plugintest.Main(m) }

// ---- fixtures ----

var (
	fixOnce          sync.Once
	rsaKey           *rsa.PrivateKey
	ecKey            *ecdsa.PrivateKey
	rsaPEM, ecPEM    string
	alicePwHash      string
	fixtureConsumers []consumers.Consumer
)

func pubPEM(t *testing.T, pub any) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// fixtures: alice (admins, staff) with key, basic and HS256 credentials; bob
// (guests) with a key, an RS256 and an ES256 credential; carol without groups.
func fixtures(t *testing.T) []consumers.Consumer {
	fixOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
		if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			t.Fatal(err)
		}
		rsaPEM, ecPEM = pubPEM(t, &rsaKey.PublicKey), pubPEM(t, &ecKey.PublicKey)
		h, err := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		alicePwHash = string(h)
		cid := "c-alice"
		fixtureConsumers = []consumers.Consumer{
			{ID: 1, Username: "alice", CustomID: &cid, Groups: []string{"admins", "staff"}, Credentials: []consumers.Credential{
				{ID: 11, Type: "key-auth", Key: "alice-key"},
				{ID: 12, Type: "basic-auth", Username: "alice", PasswordHash: alicePwHash},
				{ID: 13, Type: "jwt", Key: "alice-iss", Algorithm: "HS256", Secret: "alice-secret"},
			}},
			{ID: 2, Username: "bob", Groups: []string{"guests"}, Credentials: []consumers.Credential{
				{ID: 21, Type: "key-auth", Key: "bob-key"},
				{ID: 22, Type: "jwt", Key: "bob-rs", Algorithm: "RS256", PublicKey: rsaPEM},
				{ID: 23, Type: "jwt", Key: "bob-es", Algorithm: "ES256", PublicKey: ecPEM},
				{ID: 24, Type: "jwt", Key: "bob-hs512", Algorithm: "HS512", Secret: "bob-secret-512"},
			}},
			{ID: 3, Username: "carol", Credentials: []consumers.Credential{
				{ID: 31, Type: "key-auth", Key: "carol-key"},
			}},
		}
	})
	return fixtureConsumers
}

func with(handler string, cfg map[string]any, t *testing.T) map[string]any {
	m := map[string]any{"handler": handler, "consumers": fixtures(t)}
	for k, v := range cfg {
		m[k] = v
	}
	return m
}

func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ---- config validation ----

// configs is what each auth type makes of configs (an empty config means
// all defaults).
var configs = []plugintest.Config{
	{
		Type: "key-auth",
		Normalized: [][2]string{
			{``, `{"key_names":["apikey"],"hide_credentials":false,"anonymous":""}`},
			{`{}`, `{"key_names":["apikey"],"hide_credentials":false,"anonymous":""}`},
			{`{"anonymous":"guest"}`, `{"key_names":["apikey"],"hide_credentials":false,"anonymous":"guest"}`},
			{`{"key_names":["X-API-Key","k"],"hide_credentials":true}`, `{"key_names":["X-API-Key","k"],"hide_credentials":true,"anonymous":""}`},
		},
		Refused: map[string]string{
			`{"keynames":["a"]}`:         "config.keynames: unknown field",
			`{"consumers":[]}`:           "config.consumers: unknown field",
			`{"key_names":[]}`:           "config.key_names",
			`{"key_names":"apikey"}`:     "config.key_names: must be an array",
			`{"key_names":["bad name"]}`: "config.key_names[0]",
			`{"hide_credentials":"yes"}`: "config.hide_credentials: must be a boolean",
			`{"key_names":null}`:         "config.key_names: must not be null",
		},
	},
	{
		Type: "basic-auth",
		Normalized: [][2]string{
			{``, `{"realm":"gateway","hide_credentials":false,"anonymous":""}`},
			{`{}`, `{"realm":"gateway","hide_credentials":false,"anonymous":""}`},
		},
		Refused: map[string]string{
			`{"realm":""}`:             "config.realm",
			`{"hide_credential":true}`: "config.hide_credential: unknown field",
		},
	},
	{
		Type: "jwt",
		Normalized: [][2]string{
			{``, `{"header_names":["Authorization"],"query_names":["jwt"],"cookie_names":[],"key_claim_name":"iss","claims_to_verify":["exp"],"maximum_expiration_s":0,"leeway_s":0,"anonymous":""}`},
			{`{}`, `{"header_names":["Authorization"],"query_names":["jwt"],"cookie_names":[],"key_claim_name":"iss","claims_to_verify":["exp"],"maximum_expiration_s":0,"leeway_s":0,"anonymous":""}`},
			{`{"claims_to_verify":["exp","nbf"],"maximum_expiration_s":3600,"cookie_names":["tok"]}`, `{"header_names":["Authorization"],"query_names":["jwt"],"cookie_names":["tok"],"key_claim_name":"iss","claims_to_verify":["exp","nbf"],"maximum_expiration_s":3600,"leeway_s":0,"anonymous":""}`},
		},
		Refused: map[string]string{
			`{"claims_to_verify":["iat"]}`:                           "config.claims_to_verify[0]: must be one of exp, nbf",
			`{"maximum_expiration_s":-1}`:                            "config.maximum_expiration_s: must be at least 0",
			`{"key_claim_name":""}`:                                  "config.key_claim_name",
			`{"header_names":[],"query_names":[],"cookie_names":[]}`: "config.header_names",
			`{"secret":"x"}`:                                         "config.secret: unknown field",
		},
	},
	{
		Type: "openid-connect",
		Normalized: [][2]string{
			{`{"issuer":"https://id.example.com","client_id":"api","bearer_only":true}`, `{"issuer":"https://id.example.com","client_id":"api","client_secret":"","audiences":[],"scopes_required":[],"bearer_only":true,"introspection":false,"consumer_claim":"sub","consumer_required":false,"upstream_headers":[],"hide_credentials":false,"redirect_path":"/.oidc/callback","logout_path":"","session_ttl_s":3600,"anonymous":""}`},
			{`{"issuer":"http://127.0.0.1:9000/realms/x","client_id":"web","client_secret":"s","logout_path":"/logout","upstream_headers":["X-Userinfo"]}`, `{"issuer":"http://127.0.0.1:9000/realms/x","client_id":"web","client_secret":"s","audiences":[],"scopes_required":[],"bearer_only":false,"introspection":false,"consumer_claim":"sub","consumer_required":false,"upstream_headers":["X-Userinfo"],"hide_credentials":false,"redirect_path":"/.oidc/callback","logout_path":"/logout","session_ttl_s":3600,"anonymous":""}`},
		},
		Refused: map[string]string{
			`{"client_id":"api","bearer_only":true}`:                                                                   "config.issuer: is required",
			`{"issuer":"http://id.example.com","client_id":"api","bearer_only":true}`:                                  "config.issuer: must use https",
			`{"issuer":"https://u:p@id.example.com","client_id":"api","bearer_only":true}`:                             "config.issuer",
			`{"issuer":"ftp://id.example.com","client_id":"api","bearer_only":true}`:                                   "config.issuer",
			`{"issuer":"https://id.example.com","bearer_only":true}`:                                                   "config.client_id: is required",
			`{"issuer":"https://id.example.com","client_id":"web"}`:                                                    "config.client_secret: is required",
			`{"issuer":"https://id.example.com","client_id":"api","bearer_only":true,"introspection":true}`:            "config.client_secret: is required for introspection",
			`{"issuer":"https://id.example.com","client_id":"api","bearer_only":true,"upstream_headers":["X-Other"]}`:  "config.upstream_headers[0]",
			`{"issuer":"https://id.example.com","client_id":"api","bearer_only":true,"session_ttl_s":10}`:              "config.session_ttl_s",
			`{"issuer":"https://id.example.com","client_id":"api","bearer_only":true,"redirect_path":"cb"}`:            "config.redirect_path",
			`{"issuer":"https://id.example.com","client_id":"api","bearer_only":true,"logout_path":"/.oidc/callback"}`: "config.logout_path",
			`{"issuer":"https://id.example.com","client_id":"api","bearer_only":true,"audiences":[""]}`:                "config.audiences[0]",
			`{"issuer":"https://id.example.com","client_id":"api","bearer_only":true,"instance_id":3}`:                 "config.instance_id: unknown field",
		},
		Caddyfile: [][2]string{
			{"gateway_openid_connect https://id.example.com {\n client_id api\n bearer_only\n scopes_required read write\n}", `{"handler":"gateway_openid_connect","issuer":"https://id.example.com","client_id":"api","client_secret":"","audiences":[],"scopes_required":["read","write"],"bearer_only":true,"introspection":false,"consumer_claim":"sub","consumer_required":false,"upstream_headers":[],"hide_credentials":false,"redirect_path":"/.oidc/callback","logout_path":"","session_ttl_s":3600,"anonymous":""}`},
		},
	},
	{
		Type: "acl",
		Normalized: [][2]string{
			{`{"allow":["a"]}`, `{"allow":["a"],"deny":[],"hide_groups_header":false}`},
		},
		Refused: map[string]string{
			`{}`:                           "config.allow: exactly one",
			`{"allow":["a"],"deny":["b"]}`: "config.allow: exactly one",
			`{"allow":[""]}`:               "config.allow[0]",
			`{"groups":["a"]}`:             "config.groups: unknown field",
		},
	},
}

// An inline credential line with the wrong number of arguments is refused,
// naming what the line takes.
func TestInlineCredentialArguments(t *testing.T) {
	for bad, want := range map[string]string{
		"gateway_key_auth {\n consumer alice {\n key a b\n }\n}":       "key: want <api-key>",
		"gateway_basic_auth {\n consumer alice {\n basic alice\n }\n}": "basic: want <username> <bcrypt-hash>",
		"gateway_jwt {\n consumer alice {\n jwt k HS256\n }\n}":        "jwt: want <key> <algorithm> <secret|PEM|pem-file>",
	} {
		if _, err := plugintest.AdaptCaddyfile(t, bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", bad, err, want)
		}
	}
}

func TestConfigs(t *testing.T) {
	for _, c := range configs {
		t.Run(c.Type, c.Check)
	}
}

func TestValidateFreshStruct(t *testing.T) {
	// Validate must work without Provision (schema.Decode calls it).
	k := new(KeyAuth)
	k.SetDefaults()
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	j := new(JWT)
	j.SetDefaults()
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
	b := new(BasicAuth)
	b.SetDefaults()
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := new(ACL).Validate(); err == nil {
		t.Fatal("acl without groups must not validate")
	}
}

// ---- key-auth ----

func TestKeyAuth(t *testing.T) {
	base := plugintest.Start(t, []any{with("gateway_key_auth", nil, t)}).URL

	res := plugintest.Do(t, "GET", base+"/x", "apikey", "alice-key", "X-Consumer-Username", "mallory", "X-Consumer-ID", "99")
	plugintest.WantStatus(t, res, 200)
	if got := plugintest.UpstreamHeader(t, res, "X-Consumer-ID"); got != "1" {
		t.Errorf("X-Consumer-ID %q", got)
	}
	if got := res.Echo.Header.Values("X-Consumer-Username"); len(got) != 1 || got[0] != "alice" {
		t.Errorf("X-Consumer-Username %q", got)
	}
	if got := plugintest.UpstreamHeader(t, res, "X-Consumer-Custom-ID"); got != "c-alice" {
		t.Errorf("X-Consumer-Custom-ID %q", got)
	}
	if got := plugintest.UpstreamHeader(t, res, "X-Consumer-Groups"); got != "admins,staff" {
		t.Errorf("X-Consumer-Groups %q", got)
	}
	if plugintest.UpstreamHeader(t, res, "Apikey") != "alice-key" {
		t.Error("key header must be kept without hide_credentials")
	}

	// query parameter; custom id absent for bob; client-sent custom id stripped
	res = plugintest.Do(t, "GET", base+"/x?apikey=bob-key&a=1", "X-Consumer-Custom-ID", "forged")
	plugintest.WantStatus(t, res, 200)
	if plugintest.UpstreamHeader(t, res, "X-Consumer-Username") != "bob" || plugintest.UpstreamHeader(t, res, "X-Consumer-Custom-ID") != "" {
		t.Errorf("bob headers: %v", res.Echo.Header)
	}
	if res.Echo.Query != "apikey=bob-key&a=1" {
		t.Errorf("query %q", res.Echo.Query)
	}

	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/x"), 401)
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/x", "apikey", "nope"), 401)
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/x?apikey=nope"), 401)
}

func TestKeyAuthHideCredentials(t *testing.T) {
	base := plugintest.Start(t, []any{with("gateway_key_auth", map[string]any{
		"key_names": []string{"X-API-Key", "key"}, "hide_credentials": true,
	}, t)}).URL
	res := plugintest.Do(t, "GET", base+"/x", "X-API-Key", "alice-key")
	plugintest.WantStatus(t, res, 200)
	if plugintest.UpstreamHeader(t, res, "X-API-Key") != "" {
		t.Error("key header not hidden")
	}
	res = plugintest.Do(t, "GET", base+"/x?b=2&key=bob-key&a=1")
	plugintest.WantStatus(t, res, 200)
	if res.Echo.Query != "a=1&b=2" {
		t.Errorf("query %q, want key removed", res.Echo.Query)
	}
	if plugintest.UpstreamHeader(t, res, "X-Consumer-Username") != "bob" {
		t.Error("bob not authenticated")
	}
	// the default name is not configured here
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/x", "apikey", "alice-key"), 401)
}

// ---- basic-auth ----

func basicHeader(u, p string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(u, p)
	return r.Header.Get("Authorization")
}

func TestBasicAuth(t *testing.T) {
	base := plugintest.Start(t, []any{with("gateway_basic_auth", map[string]any{"realm": "my api"}, t)}).URL

	res := plugintest.Do(t, "GET", base+"/", "Authorization", basicHeader("alice", "alice-pw"), "X-Consumer-Groups", "root")
	plugintest.WantStatus(t, res, 200)
	if plugintest.UpstreamHeader(t, res, "X-Consumer-Username") != "alice" || plugintest.UpstreamHeader(t, res, "X-Consumer-Groups") != "admins,staff" {
		t.Errorf("headers %v", res.Echo.Header)
	}
	if plugintest.UpstreamHeader(t, res, "Authorization") == "" {
		t.Error("Authorization removed without hide_credentials")
	}
	// cached verification: same answer
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "Authorization", basicHeader("alice", "alice-pw")), 200)

	for _, h := range [][]string{
		nil,
		{"Authorization", basicHeader("alice", "wrong")},
		{"Authorization", basicHeader("nobody", "alice-pw")},
		{"Authorization", "Bearer abc"},
	} {
		res := plugintest.Do(t, "GET", base+"/", h...)
		plugintest.WantGatewayError(t, res, 401)
		if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, `Basic realm="my api"`) {
			t.Errorf("WWW-Authenticate %q", got)
		}
	}
}

func TestBasicAuthHideAndCache(t *testing.T) {
	base := plugintest.Start(t, []any{with("gateway_basic_auth", map[string]any{"hide_credentials": true}, t)}).URL
	res := plugintest.Do(t, "GET", base+"/", "Authorization", basicHeader("alice", "alice-pw"))
	plugintest.WantStatus(t, res, 200)
	if plugintest.UpstreamHeader(t, res, "Authorization") != "" {
		t.Error("Authorization not hidden")
	}
	res = plugintest.Do(t, "GET", base+"/")
	if got := res.Header.Get("WWW-Authenticate"); got != `Basic realm="gateway", charset="UTF-8"` {
		t.Errorf("default realm: %q", got)
	}

	// the cache: bounded, keyed by user+password, tied to the hash
	c := newVerifyCache(3, time.Minute)
	b := &BasicAuth{cache: c}
	ctx := context.Background()
	if !b.verify(ctx, "alice", "alice-pw", alicePwHash) || c.len() != 1 {
		t.Fatal("first verification")
	}
	if !c.get(c.key("alice", "alice-pw"), alicePwHash) {
		t.Fatal("not cached")
	}
	if b.verify(ctx, "alice", "wrong", alicePwHash) || c.len() != 1 {
		t.Fatal("failures must not be cached")
	}
	other, _ := bcrypt.GenerateFromPassword([]byte("other"), bcrypt.MinCost)
	if b.verify(ctx, "alice", "alice-pw", string(other)) {
		t.Fatal("cache entry must not outlive a changed hash")
	}
	for i := 0; i < 10; i++ {
		c.put(c.key("u", string(rune('a'+i))), "h")
	}
	if c.len() > 3 {
		t.Fatalf("cache grew to %d", c.len())
	}
	exp := newVerifyCache(10, -time.Second)
	exp.put(exp.key("a", "b"), "h")
	if exp.get(exp.key("a", "b"), "h") {
		t.Fatal("expired entry used")
	}
}

// TestBasicAuthComparisonsBounded: the bcrypt comparisons any client can
// ask for (wrong passwords, unknown users) run at most len(bcryptSlots)
// at once; the others wait their turn (a client going away stops waiting).
// Here the test holds every slot: no request is answered until it lets go.
func TestBasicAuthComparisonsBounded(t *testing.T) {
	base := plugintest.Start(t, []any{with("gateway_basic_auth", nil, t)}).URL
	for range cap(bcryptSlots) {
		bcryptSlots <- struct{}{}
	}
	released := false
	release := func() {
		if !released {
			released = true
			for range cap(bcryptSlots) {
				<-bcryptSlots
			}
		}
	}
	defer release()
	done := make(chan int, 2)
	for _, auth := range []string{basicHeader("alice", "wrong"), basicHeader("nobody", "x")} {
		go func() {
			req, _ := http.NewRequest("GET", base+"/", nil)
			req.Header.Set("Authorization", auth)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	select {
	case st := <-done:
		t.Fatalf("answered %d while every comparison slot was taken", st)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	for range 2 {
		select {
		case st := <-done:
			if st != 401 {
				t.Errorf("status %d, want 401", st)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer once the slots were free")
		}
	}
}

// ---- jwt ----

func TestJWT(t *testing.T) {
	fixtures(t)
	base := plugintest.Start(t, []any{with("gateway_jwt", map[string]any{"cookie_names": []string{"token"}}, t)}).URL
	now := time.Now()
	hs := sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss", "exp": now.Add(time.Hour).Unix()})
	rs := sign(t, jwt.SigningMethodRS256, rsaKey, jwt.MapClaims{"iss": "bob-rs", "exp": now.Add(time.Hour).Unix()})
	es := sign(t, jwt.SigningMethodES256, ecKey, jwt.MapClaims{"iss": "bob-es", "exp": now.Add(time.Hour).Unix()})
	hs512 := sign(t, jwt.SigningMethodHS512, []byte("bob-secret-512"), jwt.MapClaims{"iss": "bob-hs512", "exp": now.Add(time.Hour).Unix()})

	for name, tc := range map[string]struct {
		tok, user string
	}{"HS256": {hs, "alice"}, "RS256": {rs, "bob"}, "ES256": {es, "bob"}, "HS512": {hs512, "bob"}} {
		res := plugintest.Do(t, "GET", base+"/", "Authorization", "Bearer "+tc.tok, "X-Consumer-ID", "77")
		plugintest.WantStatus(t, res, 200)
		if got := plugintest.UpstreamHeader(t, res, "X-Consumer-Username"); got != tc.user {
			t.Errorf("%s: consumer %q", name, got)
		}
		if got := res.Echo.Header.Values("X-Consumer-ID"); len(got) != 1 || got[0] == "77" {
			t.Errorf("%s: X-Consumer-ID %q", name, got)
		}
	}
	// lower-case scheme, query, cookie
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "Authorization", "bearer "+hs), 200)
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/?jwt="+url.QueryEscape(rs)), 200)
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "Cookie", "token="+es), 200)

	bad := map[string]string{
		"none":            "",
		"basic scheme":    "Basic " + hs,
		"garbage":         "Bearer not.a.jwt",
		"expired":         "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss", "exp": now.Add(-time.Minute).Unix()}),
		"wrong secret":    "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("other"), jwt.MapClaims{"iss": "alice-iss"}),
		"unknown iss":     "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "who"}),
		"no iss":          "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"sub": "x"}),
		"alg mismatch":    "Bearer " + sign(t, jwt.SigningMethodHS384, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss"}),
		"hs with rsa key": "Bearer " + sign(t, jwt.SigningMethodHS256, []byte(rsaPEM), jwt.MapClaims{"iss": "bob-rs"}),
		"rs wrong key":    "Bearer " + sign(t, jwt.SigningMethodRS256, mustRSA(t), jwt.MapClaims{"iss": "bob-rs"}),
		"alg none":        "Bearer " + sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"iss": "alice-iss"}),
		"exp not number":  "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss", "exp": "tomorrow"}),
		// exp is in claims_to_verify by default: a token without it would
		// never expire.
		"exp missing": "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss"}),
	}
	for name, h := range bad {
		var res plugintest.Result
		if h == "" {
			res = plugintest.Do(t, "GET", base+"/")
		} else {
			res = plugintest.Do(t, "GET", base+"/", "Authorization", h)
		}
		if res.StatusCode != 401 {
			t.Errorf("%s: status %d %s", name, res.StatusCode, res.Body)
			continue
		}
		plugintest.WantGatewayError(t, res, 401)
	}
	// nbf is not required by default, but honoured when present
	future := sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss", "exp": now.Add(2 * time.Hour).Unix(), "nbf": now.Add(time.Hour).Unix()})
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/", "Authorization", "Bearer "+future), 401)
	past := sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss", "exp": now.Add(2 * time.Hour).Unix(), "nbf": now.Add(-time.Hour).Unix()})
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "Authorization", "Bearer "+past), 200)
}

func mustRSA(t *testing.T) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestJWTClaims(t *testing.T) {
	base := plugintest.Start(t, []any{with("gateway_jwt", map[string]any{
		"claims_to_verify": []string{"exp", "nbf"}, "maximum_expiration_s": 600,
		"key_claim_name": "kid", "header_names": []string{"X-Token"}, "query_names": []string{},
	}, t)}).URL
	now := time.Now()
	tok := func(c jwt.MapClaims) string {
		c["kid"] = "alice-iss"
		return sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), c)
	}
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "X-Token", tok(jwt.MapClaims{"exp": now.Add(5 * time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix()})), 200)
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "X-Token", "Bearer "+tok(jwt.MapClaims{"exp": now.Add(5 * time.Minute).Unix(), "nbf": now.Unix()})), 200)
	for name, c := range map[string]jwt.MapClaims{
		"nbf missing":    {"exp": now.Add(5 * time.Minute).Unix()},
		"nbf future":     {"exp": now.Add(5 * time.Minute).Unix(), "nbf": now.Add(time.Minute).Unix()},
		"exp too far":    {"exp": now.Add(time.Hour).Unix()},
		"exp missing":    {},
		"expired":        {"exp": now.Add(-time.Second).Unix()},
		"iss not used":   {"iss": "alice-iss", "kid": nil},
		"query disabled": nil,
	} {
		var res plugintest.Result
		switch name {
		case "query disabled":
			res = plugintest.Do(t, "GET", base+"/?jwt="+tok(jwt.MapClaims{"exp": now.Add(time.Minute).Unix()}))
		case "iss not used":
			res = plugintest.Do(t, "GET", base+"/", "X-Token", sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss", "exp": now.Add(time.Minute).Unix()}))
		default:
			res = plugintest.Do(t, "GET", base+"/", "X-Token", tok(c))
		}
		if res.StatusCode != 401 {
			t.Errorf("%s: status %d %s", name, res.StatusCode, res.Body)
		}
	}
}

// TestJWTMaximumExpirationWithoutExp: maximum_expiration_s bounds the
// lifetime of tokens also when claims_to_verify leaves exp out: a token
// whose exp is past (signed by the consumer itself, say with exp 1) is not
// within the bound, it is expired.
func TestJWTMaximumExpirationWithoutExp(t *testing.T) {
	base := plugintest.Start(t, []any{with("gateway_jwt", map[string]any{
		"claims_to_verify": []string{}, "maximum_expiration_s": 600,
	}, t)}).URL
	now := time.Now()
	tok := func(exp int64) string {
		return "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss", "exp": exp})
	}
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "Authorization", tok(now.Add(5*time.Minute).Unix())), 200)
	for name, exp := range map[string]int64{"expired": now.Add(-time.Hour).Unix(), "exp 1": 1, "too far": now.Add(time.Hour).Unix()} {
		if res := plugintest.Do(t, "GET", base+"/", "Authorization", tok(exp)); res.StatusCode != 401 {
			t.Errorf("%s: status %d %s", name, res.StatusCode, res.Body)
		}
	}
}

// TestJWTKeyClaimInHeader: key_claim_name is read from the payload, else
// from the token's (signed) JOSE header, as Kong reads it: kid.
func TestJWTKeyClaimInHeader(t *testing.T) {
	base := plugintest.Start(t, []any{with("gateway_jwt", map[string]any{"key_claim_name": "kid"}, t)}).URL
	exp := time.Now().Add(time.Minute).Unix()
	tok := func(kid string, claims jwt.MapClaims, secret string) string {
		tk := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
		tk.Header["kid"] = kid
		s, err := tk.SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	res := plugintest.Do(t, "GET", base+"/", "Authorization", tok("alice-iss", jwt.MapClaims{"exp": exp}, "alice-secret"))
	plugintest.WantStatus(t, res, 200)
	if got := plugintest.UpstreamHeader(t, res, "X-Consumer-Username"); got != "alice" {
		t.Errorf("consumer %q", got)
	}
	// the payload's claim comes first: a payload kid that is no string is
	// not replaced by the header's
	for name, h := range map[string]string{
		"wrong secret":       tok("alice-iss", jwt.MapClaims{"exp": exp}, "other"),
		"payload kid first":  tok("alice-iss", jwt.MapClaims{"exp": exp, "kid": "bob-hs512"}, "alice-secret"),
		"payload kid number": tok("alice-iss", jwt.MapClaims{"exp": exp, "kid": 7}, "alice-secret"),
	} {
		if res := plugintest.Do(t, "GET", base+"/", "Authorization", h); res.StatusCode != 401 {
			t.Errorf("%s: status %d", name, res.StatusCode)
		}
	}
}

// ---- acl ----

func TestACL(t *testing.T) {
	base := plugintest.Start(t, []any{
		with("gateway_key_auth", nil, t),
		map[string]any{"handler": "gateway_acl", "allow": []string{"staff", "ops"}},
	}).URL
	res := plugintest.Do(t, "GET", base+"/", "apikey", "alice-key")
	plugintest.WantStatus(t, res, 200)
	if plugintest.UpstreamHeader(t, res, "X-Consumer-Groups") != "admins,staff" {
		t.Error("groups header")
	}
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/", "apikey", "bob-key"), 403)
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/", "apikey", "carol-key"), 403)

	base = plugintest.Start(t, []any{
		with("gateway_key_auth", nil, t),
		map[string]any{"handler": "gateway_acl", "deny": []string{"guests"}, "hide_groups_header": true},
	}).URL
	res = plugintest.Do(t, "GET", base+"/", "apikey", "alice-key")
	plugintest.WantStatus(t, res, 200)
	if plugintest.UpstreamHeader(t, res, "X-Consumer-Groups") != "" || plugintest.UpstreamHeader(t, res, "X-Consumer-Username") != "alice" {
		t.Errorf("hide_groups_header: %v", res.Echo.Header)
	}
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "apikey", "carol-key"), 200)
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/", "apikey", "bob-key"), 403)

	// no authenticated consumer: 403, even with forged identity headers
	base = plugintest.Start(t, []any{map[string]any{"handler": "gateway_acl", "allow": []string{"admins"}}}).URL
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/", "X-Consumer-Groups", "admins", "X-Consumer-ID", "1"), 403)
}

// ---- Caddyfile ----

func TestCaddyfile(t *testing.T) {
	fixtures(t)
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "bob.pem")
	if err := os.WriteFile(pemFile, []byte(rsaPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	base := plugintest.StartCaddyfile(t, `
http://127.0.0.1:{PORT} {
	reverse_proxy {UP}
	gateway_acl {
		deny banned
	}
	gateway_key_auth X-API-Key {
		hide_credentials
		consumer alice {
			id 7
			custom_id c7
			groups admins staff
			key k-alice
		}
		consumer eve {
			groups banned
			key k-eve
		}
	}
}
http://localhost:{PORT} {
	gateway_jwt {
		claims_to_verify exp nbf
		consumer bob {
			jwt bob-rs RS256 `+pemFile+`
			jwt bob-hs HS384 s3cret
		}
	}
	gateway_basic_auth "secret area" {
		consumer alice {
			basic alice `+alicePwHash+`
		}
	}
	reverse_proxy {UP}
}
`).URL
	res := plugintest.Do(t, "GET", base+"/", "X-API-Key", "k-alice")
	plugintest.WantStatus(t, res, 200)
	if plugintest.UpstreamHeader(t, res, "X-Consumer-ID") != "7" || plugintest.UpstreamHeader(t, res, "X-Consumer-Custom-ID") != "c7" || plugintest.UpstreamHeader(t, res, "X-API-Key") != "" {
		t.Errorf("headers %v", res.Echo.Header)
	}
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/", "X-API-Key", "k-eve"), 403) // acl runs after key-auth
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/"), 401)

	other := strings.Replace(base, "127.0.0.1", "localhost", 1)
	valid := func(iss string) jwt.MapClaims {
		return jwt.MapClaims{"iss": iss, "exp": time.Now().Add(time.Hour).Unix(), "nbf": time.Now().Add(-time.Minute).Unix()}
	}
	rs := sign(t, jwt.SigningMethodRS256, rsaKey, valid("bob-rs"))
	res = plugintest.Do(t, "GET", other+"/", "Authorization", "Bearer "+rs)
	if res.StatusCode != 401 || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), `Basic realm="secret area"`) {
		t.Fatalf("jwt alone must not pass basic-auth: %d %v", res.StatusCode, res.Header)
	}
	// jwt and basic-auth both required: a request can carry only one
	// Authorization header, so use the query for the token.
	res = plugintest.Do(t, "GET", other+"/?jwt="+rs, "Authorization", basicHeader("alice", "alice-pw"))
	plugintest.WantStatus(t, res, 200)
	if plugintest.UpstreamHeader(t, res, "X-Consumer-Username") != "bob" { // jwt runs after basic-auth: the later plugin wins
		t.Errorf("consumer %q", plugintest.UpstreamHeader(t, res, "X-Consumer-Username"))
	}
	hs := sign(t, jwt.SigningMethodHS384, []byte("s3cret"), valid("bob-hs"))
	plugintest.WantStatus(t, plugintest.Do(t, "GET", other+"/?jwt="+hs, "Authorization", basicHeader("alice", "alice-pw")), 200)
}
