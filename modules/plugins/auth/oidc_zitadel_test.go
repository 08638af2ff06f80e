package auth

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// zitadelOP starts the example OpenID provider of github.com/zitadel/oidc
// (a provider nobody here wrote) on 127.0.0.1, with a confidential web
// client "web" (secret "secret") whose redirect URI is redirectURI. Its
// users: test-user@127.0.0.1 and test-user2, password verysecure.
func zitadelOP(t *testing.T, redirectURI string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	clients := map[string]*storage.Client{"web": storage.WebClient("web", "secret", redirectURI)}
	st := storage.NewStorageWithClients(storage.NewUserStore(issuer), clients)
	srv := &http.Server{Handler: exampleop.SetupServer(issuer, st, nil, false)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return issuer
}

// signInAt drives the example provider's login form for a browser (client
// with a cookie jar) that a request sent there: it posts the user's
// credentials and follows the redirects back to the gateway.
func signInAt(t *testing.T, client *http.Client, loginPage *http.Response, user string) *http.Response {
	t.Helper()
	u := loginPage.Request.URL
	id := u.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("not the provider's login page: %s", u)
	}
	resp, err := client.PostForm(u.Scheme+"://"+u.Host+"/login/username", url.Values{"id": {id}, "username": {user}, "password": {"verysecure"}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Against the example provider: bearer JWTs (its ID tokens) verified with
// its discovered key set, opaque access tokens by introspection (cached),
// and the browser sign-in with PKCE, state and nonce, the session cookie,
// the return to the original URL, and logout.
func TestOIDCZitadelProvider(t *testing.T) {
	port := plugintest.FreePort(t)
	gwURL := "http://127.0.0.1:" + strconv.Itoa(port)
	issuer := zitadelOP(t, gwURL+"/.oidc/callback")
	user := "test-user@127.0.0.1"
	g := plugintest.Start(t, []any{with("gateway_openid_connect", map[string]any{
		"issuer": issuer, "client_id": "web", "client_secret": "secret", "introspection": true,
		"logout_path": "/logout", "upstream_headers": []string{"X-Access-Token", "X-ID-Token", "X-Userinfo"},
	}, t)}, plugintest.WithPort(port))

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodGet, gwURL+"/app/page?x=1", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	login, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	resp := signInAt(t, browser, login, user)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after sign-in: %d %s", resp.StatusCode, body)
	}
	if resp.Request.URL.String() != gwURL+"/app/page?x=1" {
		t.Fatalf("returned to %s, want the original URL", resp.Request.URL)
	}
	up := g.Upstream.Last()
	access, idToken := up.Header.Get("X-Access-Token"), up.Header.Get("X-ID-Token")
	if access == "" || strings.Count(idToken, ".") != 2 {
		t.Fatalf("upstream tokens: access %q id %q", access, idToken)
	}
	if strings.Contains(up.Header.Get("Cookie"), "gateway_oidc") {
		t.Fatalf("the session cookie was proxied: %q", up.Header.Get("Cookie"))
	}
	var session *http.Cookie
	for _, c := range jar.Cookies(&url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port), Path: "/"}) {
		if strings.HasPrefix(c.Name, "gateway_oidc_") {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}

	// The session serves further requests (an XHR too) without the
	// provider's login.
	resp, err = browser.Get(gwURL + "/api/data")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("with the session: %v %v", resp, err)
	}
	resp.Body.Close()

	// The ID token, as a bearer JWT, verifies against the key set (aud
	// is the client id); the opaque access token by introspection.
	plain := &http.Client{}
	for name, tok := range map[string]string{"JWT": idToken, "opaque": access} {
		for range 2 { // the second introspection comes from the cache
			r, _ := http.NewRequest(http.MethodGet, gwURL+"/", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			resp, err := plain.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s bearer token: %d", name, resp.StatusCode)
			}
		}
	}
	r, _ := http.NewRequest(http.MethodGet, gwURL+"/", nil)
	r.Header.Set("Authorization", "Bearer not-a-token-of-the-provider")
	if resp, err := plain.Do(r); err != nil || resp.StatusCode != 401 {
		t.Fatalf("unknown opaque token: %v %v", resp, err)
	}

	// A replayed callback (its state cookie is gone, its code used) is
	// refused, as is a callback carrying a foreign redirect target.
	cb := gwURL + "/.oidc/callback?code=x&state=y&redirect=https%3A%2F%2Fevil.example%2F"
	noFollow := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := noFollow.Get(cb); err != nil || resp.StatusCode != 400 {
		t.Fatalf("callback without a sign-in under way: %v %v", resp, err)
	}

	// Another node (the same plugin config on another listener, loaded
	// afresh) reads the session: nothing of it is kept per node.
	cfg := map[string]any{
		"issuer": issuer, "client_id": "web", "client_secret": "secret", "introspection": true,
		"logout_path": "/logout", "upstream_headers": []string{"X-Access-Token", "X-ID-Token", "X-Userinfo"},
	}
	g2 := plugintest.Start(t, []any{with("gateway_openid_connect", cfg, t)})
	r, _ = http.NewRequest(http.MethodGet, g2.URL+"/other-node", nil)
	r.AddCookie(session)
	if resp, err := plain.Do(r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("session on another node: %v %v", resp, err)
	}
	plugintest.Start(t, []any{with("gateway_openid_connect", cfg, t)}, plugintest.WithPort(port), plugintest.WithUpstream(g.Upstream))

	// Logout ends the session and sends the browser to the provider's
	// end_session_endpoint.
	resp, err = noFollow.Get(gwURL + "/logout")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != 302 || !strings.HasPrefix(loc, issuer) || !strings.Contains(loc, "id_token_hint=") {
		t.Fatalf("logout: %d %q", resp.StatusCode, loc)
	}
	r, _ = http.NewRequest(http.MethodGet, gwURL+"/api/data", nil)
	if resp, err := noFollow.Do(r); err != nil || resp.StatusCode != 401 {
		t.Fatalf("after logout: %v %v", resp, err)
	}
}

// A replayed state: a second callback with the same state and the same
// sign-in cookie (a captured one) is refused: the code is single-use at
// the provider, and the browser's cookie is cleared by the first.
func TestOIDCZitadelReplayedState(t *testing.T) {
	port := plugintest.FreePort(t)
	gwURL := "http://127.0.0.1:" + strconv.Itoa(port)
	issuer := zitadelOP(t, gwURL+"/.oidc/callback")
	plugintest.Start(t, []any{with("gateway_openid_connect", map[string]any{
		"issuer": issuer, "client_id": "web", "client_secret": "secret",
	}, t)}, plugintest.WithPort(port))

	jar, _ := cookiejar.New(nil)
	var callback *url.URL
	var stateCookie string
	browser := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if r.URL.Path == "/.oidc/callback" && callback == nil {
			callback = r.URL
			for _, c := range jar.Cookies(r.URL) {
				if strings.HasPrefix(c.Name, "gateway_oidc_state_") {
					stateCookie = c.Name + "=" + c.Value
				}
			}
		}
		return nil
	}}
	req, _ := http.NewRequest(http.MethodGet, gwURL+"/", nil)
	req.Header.Set("Accept", "text/html")
	login, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	resp := signInAt(t, browser, login, "test-user2")
	resp.Body.Close()
	if resp.StatusCode != 200 || callback == nil || stateCookie == "" {
		t.Fatalf("sign-in: %d, callback %v", resp.StatusCode, callback)
	}
	r, _ := http.NewRequest(http.MethodGet, callback.String(), nil)
	r.Header.Set("Cookie", stateCookie)
	replay, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(r)
	if err != nil {
		t.Fatal(err)
	}
	replay.Body.Close()
	if replay.StatusCode != 401 || len(replay.Cookies()) == 0 {
		t.Fatalf("replayed callback: %d", replay.StatusCode)
	}
	for _, c := range replay.Cookies() {
		if !strings.HasPrefix(c.Name, "gateway_oidc_state_") || c.MaxAge >= 0 {
			t.Fatalf("replayed callback set %s", c)
		}
	}
}

// The URL a browser returns to after signing in is the one it asked for,
// not the path the route forwards (strip_path, a rewrite).
func TestOIDCZitadelReturnsToTheClientsURL(t *testing.T) {
	port := plugintest.FreePort(t)
	gwURL := "http://127.0.0.1:" + strconv.Itoa(port)
	issuer := zitadelOP(t, gwURL+"/.oidc/callback")
	g := plugintest.Start(t, []any{
		map[string]any{"handler": "rewrite", "strip_path_prefix": "/app"},
		with("gateway_openid_connect", map[string]any{"issuer": issuer, "client_id": "web", "client_secret": "secret"}, t),
	}, plugintest.WithPort(port))
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodGet, gwURL+"/app/page?x=1", nil)
	req.Header.Set("Accept", "text/html")
	login, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	resp := signInAt(t, browser, login, "test-user2")
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.String() != gwURL+"/app/page?x=1" || g.Upstream.Last().Path != "/page" {
		t.Fatalf("after sign-in: %d at %s, upstream %s", resp.StatusCode, resp.Request.URL, g.Upstream.Last().Path)
	}
}
