package auth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/caddy-gateway/gateway/internal/gwctx"
)

// The browser sign-in of the openid-connect plugin. Its state lives in
// two cookies encrypted with a key derived from the client secret (so
// every node of a cluster, which shares the stored plugin config, reads
// the cookies any node set; nothing is kept per node): the sign-in's
// state (state, nonce, PKCE verifier and the URL to return to) for the
// callback only, and the session (the tokens and the ID token's claims).

const (
	// signInTTL bounds the time from the redirect to the provider to the
	// callback.
	signInTTL = 10 * time.Minute
	// maxCookie bounds a cookie's value (browsers keep about 4 KiB per
	// cookie, name and attributes included).
	maxCookie = 3900
	// refreshBefore is how long before its expiry a session's access
	// token is refreshed.
	refreshBefore = 30 * time.Second
)

// cookieNames are one plugin instance's cookie names.
type cookieNames struct{ session, state string }

func newCookieNames(instanceKey string) cookieNames {
	sum := sha256.Sum256([]byte(instanceKey))
	id := hex.EncodeToString(sum[:4])
	return cookieNames{session: "gateway_oidc_" + id, state: "gateway_oidc_state_" + id}
}

// sessionCipher encrypts and authenticates the cookies (AES-256-GCM).
type sessionCipher struct{ aead cipher.AEAD }

func newSessionCipher(secret, instanceKey string) (sessionCipher, error) {
	key, err := hkdf.Key(sha256.New, []byte(secret), []byte(instanceKey), "caddy-gateway openid-connect cookies", 32)
	if err != nil {
		return sessionCipher{}, fmt.Errorf("deriving the cookie key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sessionCipher{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sessionCipher{}, err
	}
	return sessionCipher{aead}, nil
}

// seal encrypts v (JSON) for the cookie name.
func (c sessionCipher) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, c.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := c.aead.Seal(nonce, nonce, plain, []byte(name))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// open decrypts a cookie value sealed for name into v.
func (c sessionCipher) open(name, value string, v any) bool {
	if c.aead == nil || len(value) > maxCookie {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) < c.aead.NonceSize() {
		return false
	}
	plain, err := c.aead.Open(nil, b[:c.aead.NonceSize()], b[c.aead.NonceSize():], []byte(name))
	if err != nil {
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(plain)))
	dec.UseNumber()
	return dec.Decode(v) == nil
}

// signInState is the state cookie's content.
type signInState struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	URL      string `json:"u"`
	Exp      int64  `json:"e"`
}

// session is the session cookie's content.
type session struct {
	Claims       map[string]any `json:"c"`
	AccessToken  string         `json:"at,omitempty"`
	IDToken      string         `json:"it,omitempty"`
	RefreshToken string         `json:"rt,omitempty"`
	Scope        []string       `json:"s,omitempty"`
	TokenExp     int64          `json:"te,omitempty"`
	Exp          int64          `json:"e"`
}

func (o *OpenIDConnect) oauthConfig(d *discovered, redirectURI string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		Endpoint: d.provider.Endpoint(), RedirectURL: redirectURI,
		Scopes: append([]string{oidc.ScopeOpenID}, o.ScopesRequired...),
	}
}

// clientCtx carries the provider's HTTP client for oauth2.
func (o *OpenIDConnect) clientCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, o.provider.client)
}

// redirectURI is the callback's absolute URL for the request's host.
func (o *OpenIDConnect) redirectURI(r *http.Request, base string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + base + o.RedirectPath
}

// signIn sends a browser to the provider's authorization endpoint.
func (o *OpenIDConnect) signIn(w http.ResponseWriter, r *http.Request, base string) error {
	d, err := o.provider.discovery(r.Context())
	if err != nil {
		gwctx.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return nil
	}
	st := signInState{
		State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(),
		URL: originalURL(r).RequestURI(), Exp: time.Now().Add(signInTTL).Unix(),
	}
	if len(st.URL) > 2048 {
		st.URL = base + "/"
	}
	v, err := o.aead.seal(o.cookies.state, st)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{
		Name: o.cookies.state, Value: v, Path: base + o.RedirectPath, MaxAge: int(signInTTL / time.Second),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
	cfg := o.oauthConfig(d, o.redirectURI(r, base))
	http.Redirect(w, r, cfg.AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oidc.Nonce(st.Nonce)), http.StatusFound)
	return nil
}

// callback ends a browser sign-in: the state must be the state cookie's,
// the code is exchanged (with the PKCE verifier), the ID token verified
// (nonce included); the browser gets its session cookie and goes back to
// the URL it first asked for, and only there.
func (o *OpenIDConnect) callback(w http.ResponseWriter, r *http.Request, base string) error {
	clear := &http.Cookie{Name: o.cookies.state, Value: "", Path: base + o.RedirectPath, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode}
	var st signInState
	ck, err := r.Cookie(o.cookies.state)
	if err != nil || !o.aead.open(o.cookies.state, ck.Value, &st) || time.Now().Unix() > st.Exp {
		http.SetCookie(w, clear)
		gwctx.WriteError(w, http.StatusBadRequest, "no sign-in under way in this browser (or it expired)")
		return nil
	}
	http.SetCookie(w, clear)
	q := r.URL.Query()
	if q.Get("state") == "" || q.Get("state") != st.State {
		gwctx.WriteError(w, http.StatusBadRequest, "state mismatch")
		return nil
	}
	if e := q.Get("error"); e != "" {
		gwctx.WriteError(w, http.StatusUnauthorized, "the provider refused the sign-in: "+truncate(e, 64))
		return nil
	}
	code := q.Get("code")
	if code == "" || len(code) > maxTokenLen {
		gwctx.WriteError(w, http.StatusBadRequest, "no code")
		return nil
	}
	d, err := o.provider.discovery(r.Context())
	if err != nil {
		gwctx.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return nil
	}
	cfg := o.oauthConfig(d, o.redirectURI(r, base))
	tok, err := cfg.Exchange(o.clientCtx(r.Context()), code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		gwctx.WriteError(w, http.StatusUnauthorized, "the code exchange failed")
		return nil
	}
	s, err := o.newSession(r.Context(), tok, st.Nonce, time.Now().Add(time.Duration(o.SessionTTLS)*time.Second).Unix())
	if err != nil {
		gwctx.WriteError(w, http.StatusUnauthorized, "invalid ID token")
		return nil
	}
	if err := o.setSession(w, r, s); err != nil {
		gwctx.WriteError(w, http.StatusBadGateway, err.Error())
		return nil
	}
	target := st.URL
	if !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") || strings.HasPrefix(target, "/\\") {
		target = "/"
	}
	http.Redirect(w, r, target, http.StatusFound)
	return nil
}

// newSession makes a session of a token answer: its ID token verified
// (with nonce, when not empty: a refresh answer's ID token has none).
func (o *OpenIDConnect) newSession(ctx context.Context, tok *oauth2.Token, nonce string, exp int64) (*session, error) {
	idToken, _ := tok.Extra("id_token").(string)
	if idToken == "" || len(idToken) > maxTokenLen {
		return nil, errInvalidToken
	}
	claims, err := o.provider.verifyJWT(ctx, idToken, []string{o.ClientID}, time.Now())
	if err != nil {
		return nil, err
	}
	if n, _ := claims["nonce"].(string); nonce != "" && n != nonce {
		return nil, errInvalidToken
	}
	s := &session{Claims: claims, AccessToken: tok.AccessToken, IDToken: idToken, RefreshToken: tok.RefreshToken, Exp: exp}
	if sc, ok := tok.Extra("scope").(string); ok {
		s.Scope = strings.Fields(sc)
	} else {
		// No scope in the answer: the requested ones were granted
		// (RFC 6749 5.1).
		s.Scope = append([]string{oidc.ScopeOpenID}, o.ScopesRequired...)
	}
	if !tok.Expiry.IsZero() {
		s.TokenExp = tok.Expiry.Unix()
	}
	return s, nil
}

// setSession sets the session cookie, leaving out what does not fit a
// cookie: the ID token (unless sent upstream), then the claims other than
// those the plugin reads.
func (o *OpenIDConnect) setSession(w http.ResponseWriter, r *http.Request, s *session) error {
	v, err := o.aead.seal(o.cookies.session, s)
	if err == nil && len(v) > maxCookie && !containsHeader(o.UpstreamHeaders, headerIDToken) {
		s.IDToken = ""
		v, err = o.aead.seal(o.cookies.session, s)
	}
	if err == nil && len(v) > maxCookie {
		keep := map[string]any{}
		for _, k := range []string{"sub", "iss", "aud", "exp", "iat", o.ConsumerClaim} {
			if c, ok := s.Claims[k]; ok {
				keep[k] = c
			}
		}
		s.Claims = keep
		v, err = o.aead.seal(o.cookies.session, s)
	}
	if err != nil {
		return err
	}
	if len(v) > maxCookie {
		return errors.New("the provider's tokens do not fit a session cookie")
	}
	http.SetCookie(w, &http.Cookie{
		Name: o.cookies.session, Value: v, Path: "/", MaxAge: int(s.Exp - time.Now().Unix()),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
	return nil
}

func containsHeader(list []string, h string) bool {
	for _, v := range list {
		if v == h {
			return true
		}
	}
	return false
}

// readSession returns the request's valid session, refreshing its access
// token when it is about to expire (a failed refresh ends the session).
func (o *OpenIDConnect) readSession(w http.ResponseWriter, r *http.Request) *session {
	ck, err := r.Cookie(o.cookies.session)
	if err != nil {
		return nil
	}
	var s session
	now := time.Now()
	if !o.aead.open(o.cookies.session, ck.Value, &s) || now.Unix() >= s.Exp {
		return nil
	}
	if s.TokenExp == 0 || now.Add(refreshBefore).Unix() < s.TokenExp {
		return &s
	}
	if s.RefreshToken == "" {
		return nil
	}
	d, err := o.provider.discovery(r.Context())
	if err != nil {
		return nil
	}
	src := o.oauthConfig(d, "").TokenSource(o.clientCtx(r.Context()), &oauth2.Token{RefreshToken: s.RefreshToken, Expiry: now.Add(-time.Second)})
	tok, err := src.Token()
	if err != nil {
		return nil
	}
	ns, err := o.newSession(r.Context(), tok, "", s.Exp)
	if err != nil {
		// An answer without an ID token keeps the session's claims.
		ns = &session{Claims: s.Claims, AccessToken: tok.AccessToken, IDToken: s.IDToken, RefreshToken: tok.RefreshToken, Scope: s.Scope, Exp: s.Exp}
		if !tok.Expiry.IsZero() {
			ns.TokenExp = tok.Expiry.Unix()
		}
		if _, has := tok.Extra("id_token").(string); has {
			return nil // an ID token that does not verify
		}
	}
	if ns.RefreshToken == "" {
		ns.RefreshToken = s.RefreshToken
	}
	if o.setSession(w, r, ns) != nil {
		return nil
	}
	return ns
}

// logout ends the browser session, then sends the browser to the
// provider's end_session_endpoint (RP-initiated logout) when it has one.
func (o *OpenIDConnect) logout(w http.ResponseWriter, r *http.Request) error {
	var s session
	ck, err := r.Cookie(o.cookies.session)
	hasSession := err == nil && o.aead.open(o.cookies.session, ck.Value, &s)
	http.SetCookie(w, &http.Cookie{Name: o.cookies.session, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	if d, err := o.provider.discovery(r.Context()); err == nil && d.EndSession != "" {
		u, err := url.Parse(d.EndSession)
		if err == nil {
			q := u.Query()
			q.Set("client_id", o.ClientID)
			if hasSession && s.IDToken != "" {
				q.Set("id_token_hint", s.IDToken)
			}
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.String(), http.StatusFound)
			return nil
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("signed out\n"))
	return nil
}

// dropSessionCookie removes the plugin's cookies from the request before
// it is proxied: the upstream has no use for them (X-Access-Token and
// X-ID-Token carry the tokens when asked for).
func (o *OpenIDConnect) dropSessionCookie(r *http.Request) {
	vals := r.Header.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var pairs []string
	for _, v := range vals {
		for p := range strings.SplitSeq(v, ";") {
			p = textproto.TrimString(p)
			name, _, _ := strings.Cut(p, "=")
			if p != "" && name != o.cookies.session && name != o.cookies.state {
				pairs = append(pairs, p)
			}
		}
	}
	if len(pairs) == 0 {
		r.Header.Del("Cookie")
		return
	}
	r.Header.Set("Cookie", strings.Join(pairs, "; "))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
