package auth_test

// A small OpenID provider for the SSO tests: discovery, JWKS, an
// authorization endpoint that approves at once (302 back with a code), and a
// token endpoint that checks the client, the redirect_uri and the PKCE
// verifier (S256) before it issues an ES256 id_token. Knobs change what the
// next id_token says (email, email_verified, nonce, expiry, audience).

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

type idpUser struct {
	Email         string
	EmailVerified any // nil: no claim
	Name          string
	Sub           string // default "sub-" + Email
}

type pendingCode struct {
	clientID, redirectURI, nonce, challenge, method string
	user                                            idpUser
}

type fakeIDP struct {
	t            testing.TB
	srv          *httptest.Server
	key          *ecdsa.PrivateKey
	ClientID     string
	ClientSecret string

	mu    sync.Mutex
	codes map[string]pendingCode
	// Knobs for the next sign-ins.
	User          idpUser
	NonceOverride *string
	ExpOffset     time.Duration // added to now for exp (default 5 min)
	Audience      string        // default ClientID
	// Seen records the last authorization request and token request.
	LastAuthorize url.Values
	LastToken     url.Values
	TokenErrors   int
	held          *tokenHold
	// Discovery overrides or adds fields of the discovery document (the
	// endpoints a malicious provider advertises, padding).
	Discovery map[string]any
	// JWKSPadding adds a field of that many bytes to the key set.
	JWKSPadding int
	// DiscoveryDelay and DiscoveryStatus make the discovery document slow
	// or failing (a provider in trouble); Discoveries counts its requests.
	DiscoveryDelay  time.Duration
	DiscoveryStatus int
	Discoveries     int
}

// tokenHold keeps the token endpoint's answers waiting (holdTokens).
type tokenHold struct {
	arrived chan struct{} // one send per waiting token request
	release chan struct{} // closed: answer them
}

func newIDP(t testing.TB) *fakeIDP {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakeIDP{t: t, key: key, ClientID: "gateway-client", ClientSecret: "idp-client-secret-" + randHex(8),
		codes: map[string]pendingCode{}, User: idpUser{Email: "alice@example.com", EmailVerified: true, Name: "Alice"}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (p *fakeIDP) Issuer() string { return p.srv.URL }

func (p *fakeIDP) discovery(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.Discoveries++
	delay, status, extra := p.DiscoveryDelay, p.DiscoveryStatus, p.Discovery
	p.mu.Unlock()
	time.Sleep(delay)
	if status != 0 {
		http.Error(w, "provider unavailable", status)
		return
	}
	doc := map[string]any{
		"issuer":                                p.Issuer(),
		"authorization_endpoint":                p.Issuer() + "/authorize",
		"token_endpoint":                        p.Issuer() + "/token",
		"jwks_uri":                              p.Issuer() + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"code_challenge_methods_supported":      []string{"S256"},
	}
	for k, v := range extra {
		doc[k] = v
	}
	writeJSON(w, 200, doc)
}

func (p *fakeIDP) jwks(w http.ResponseWriter, r *http.Request) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}}
	p.mu.Lock()
	pad := p.JWKSPadding
	p.mu.Unlock()
	if pad == 0 {
		writeJSON(w, 200, set)
		return
	}
	writeJSON(w, 200, map[string]any{"keys": set.Keys, "x-padding": strings.Repeat("x", pad)})
}

func (p *fakeIDP) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	p.LastAuthorize = q
	code := randHex(16)
	p.codes[code] = pendingCode{clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"), nonce: q.Get("nonce"),
		challenge: q.Get("code_challenge"), method: q.Get("code_challenge_method"), user: p.User}
	p.mu.Unlock()
	if q.Get("response_type") != "code" || q.Get("client_id") != p.ClientID {
		http.Error(w, "bad authorization request", 400)
		return
	}
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", 400)
		return
	}
	bq := back.Query()
	bq.Set("code", code)
	bq.Set("state", q.Get("state"))
	back.RawQuery = bq.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// holdTokens makes the token endpoint wait, before it answers, until
// release is called (again is a no-op); arrived receives once per waiting
// request (up to 16 unread). A test acts there while a callback waits for its code
// exchange.
func (p *fakeIDP) holdTokens() (arrived <-chan struct{}, release func()) {
	h := &tokenHold{arrived: make(chan struct{}, 16), release: make(chan struct{})}
	p.mu.Lock()
	p.held = h
	p.mu.Unlock()
	var once sync.Once
	return h.arrived, func() {
		once.Do(func() {
			p.mu.Lock()
			if p.held == h {
				p.held = nil
			}
			p.mu.Unlock()
			close(h.release)
		})
	}
}

func (p *fakeIDP) token(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	h := p.held
	p.mu.Unlock()
	if h != nil {
		// Without the lock: the rest of the provider keeps answering.
		select {
		case h.arrived <- struct{}{}:
		default: // nobody counts beyond the buffer
		}
		<-h.release
	}
	_ = r.ParseForm()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.LastToken = r.PostForm
	fail := func(code string) {
		p.TokenErrors++
		writeJSON(w, 400, map[string]string{"error": code})
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || secret != p.ClientSecret {
		fail("invalid_client")
		return
	}
	code := r.PostForm.Get("code")
	pc, found := p.codes[code]
	delete(p.codes, code) // single use
	if !found || r.PostForm.Get("grant_type") != "authorization_code" || pc.redirectURI != r.PostForm.Get("redirect_uri") {
		fail("invalid_grant")
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if pc.method != "S256" || base64.RawURLEncoding.EncodeToString(sum[:]) != pc.challenge {
		fail("invalid_grant")
		return
	}
	now := time.Now()
	exp := now.Add(5 * time.Minute)
	if p.ExpOffset != 0 {
		exp = now.Add(p.ExpOffset)
	}
	nonce := pc.nonce
	if p.NonceOverride != nil {
		nonce = *p.NonceOverride
	}
	aud := p.ClientID
	if p.Audience != "" {
		aud = p.Audience
	}
	sub := pc.user.Sub
	if sub == "" {
		sub = "sub-" + pc.user.Email
	}
	claims := map[string]any{
		"iss": p.Issuer(), "sub": sub, "aud": aud,
		"exp": exp.Unix(), "iat": now.Add(-time.Minute).Unix(), "nonce": nonce,
		"email": pc.user.Email, "name": pc.user.Name,
	}
	if pc.user.EmailVerified != nil {
		claims["email_verified"] = pc.user.EmailVerified
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		p.t.Error(err)
		return
	}
	idToken, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		p.t.Error(err)
		return
	}
	writeJSON(w, 200, map[string]any{"access_token": randHex(16), "token_type": "Bearer", "expires_in": 300, "id_token": idToken})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
