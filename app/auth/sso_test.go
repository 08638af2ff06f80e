package auth_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/storage"
)

// ssoFlow runs start → provider → callback in browser b and returns the
// callback's answer. tamper may change the authorization URL before the
// browser follows it.
func ssoFlow(t *testing.T, b *client, idp *fakeIDP, tamper func(u *url.URL)) answer {
	t.Helper()
	st := b.want(303, "GET", "/api/v1/auth/sso/start", nil)
	authz, err := url.Parse(st.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(authz.String(), idp.Issuer()+"/authorize?") {
		t.Fatalf("start redirects to %q", st.Header.Get("Location"))
	}
	q := authz.Query()
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if len(q.Get(k)) < 32 {
			t.Fatalf("authorization request without a proper %s: %v", k, q)
		}
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("response_type") != "code" || q.Get("client_id") != idp.ClientID ||
		q.Get("redirect_uri") != b.e.g.AdminURL+"/api/v1/auth/sso/callback" || !strings.Contains(q.Get("scope"), "openid") {
		t.Fatalf("authorization request: %v", q)
	}
	if tamper != nil {
		tamper(authz)
	}
	back := b.want(302, "GET", authz.String(), nil)
	cb := back.Header.Get("Location")
	if !strings.HasPrefix(cb, b.e.g.AdminURL+"/api/v1/auth/sso/callback?") {
		t.Fatalf("provider redirects to %q", cb)
	}
	return b.want(303, "GET", cb, nil)
}

// startSSO starts a gateway and a provider, idp, that the gateway's first
// administrator, adm, has made its SSO provider with cfg, client secret
// included.
func startSSO(t *testing.T) (e *env, idp *fakeIDP, adm *client, cfg map[string]any) {
	t.Helper()
	e = start(t)
	idp = newIDP(t)
	adm = e.withToken(e.anon().token())
	cfg = map[string]any{"issuer": idp.Issuer(), "client_id": idp.ClientID, "client_secret": idp.ClientSecret}
	adm.want(200, "PUT", "/api/v1/sso/config", cfg)
	return e, idp, adm, cfg
}

func ssoError(t *testing.T, a answer) string {
	t.Helper()
	loc, err := url.Parse(a.Header.Get("Location"))
	if err != nil || loc.Path != "/" {
		t.Fatalf("callback redirects to %q", a.Header.Get("Location"))
	}
	return loc.Query().Get("sso_error")
}

func wantSSOError(t *testing.T, a answer, reason string) {
	t.Helper()
	if got := ssoError(t, a); got != reason {
		t.Fatalf("sso_error %q, want %q", got, reason)
	}
	if setCookieOf(a, "gateway_session") != nil {
		t.Fatal("a failed SSO sign-in set a session cookie")
	}
}

func TestSSO(t *testing.T) {
	e := start(t)
	idp := newIDP(t)
	tok := e.anon().token()
	adm := e.withToken(tok)

	// Not configured yet.
	if msg := e.anon().want(400, "GET", "/api/v1/auth/sso/start", nil).errText(t); msg == "" {
		t.Fatal("no error text")
	}
	st := adm.want(200, "GET", "/api/v1/sso/config", nil).m(t)
	if st["enabled"] != false || st["config"] != nil {
		t.Fatalf("sso status: %v", st)
	}
	// Without SSO a user needs a password.
	adm.want(400, "POST", "/api/v1/users", map[string]any{"email": "alice@example.com", "role": "editor"})

	// Configuration validation.
	for _, bad := range []map[string]any{
		{"issuer": "http://idp.example.com", "client_id": "x"},
		{"issuer": "ftp://127.0.0.1", "client_id": "x"},
		{"issuer": "not a url", "client_id": "x"},
		{"issuer": "https://idp.example.com"},
		{"issuer": "https://idp.example.com", "client_id": "x", "auto_provision_role": "owner"},
		{"issuer": "https://idp.example.com", "client_id": "x", "allowed_domains": []string{"@example.com"}},
		{"issuer": "https://idp.example.com", "client_id": "x", "client_secret_set": true, "unknown": 1},
	} {
		adm.want(400, "PUT", "/api/v1/sso/config", bad)
	}
	adm.want(200, "PUT", "/api/v1/sso/config", map[string]any{"issuer": "https://idp.example.com/realms/x", "client_id": "x"})
	adm.want(200, "PUT", "/api/v1/sso/config", map[string]any{"issuer": "http://localhost:9999", "client_id": "x"})

	cfg := map[string]any{"issuer": idp.Issuer(), "client_id": idp.ClientID, "client_secret": idp.ClientSecret, "label": "Sign in with Example"}
	st = adm.want(200, "PUT", "/api/v1/sso/config", cfg).m(t)
	c, _ := st["config"].(map[string]any)
	if st["enabled"] != true || c["client_secret_set"] != true || c["issuer"] != idp.Issuer() || c["auto_provision_role"] != nil {
		t.Fatalf("sso status: %v", st)
	}
	if _, ok := c["client_secret"]; ok {
		t.Fatal("client_secret answered")
	}
	// Omitted client_secret keeps the stored one.
	delete(cfg, "client_secret")
	st = adm.want(200, "PUT", "/api/v1/sso/config", cfg).m(t)
	if st["config"].(map[string]any)["client_secret_set"] != true {
		t.Fatal("client_secret dropped when omitted")
	}
	stat := e.status()
	if sso := stat["sso"].(map[string]any); sso["enabled"] != true || sso["label"] != "Sign in with Example" {
		t.Fatalf("admin status sso: %v", stat)
	}

	// Pre-created SSO-only user (no password: SSO is configured).
	u := adm.want(200, "POST", "/api/v1/users", map[string]any{"email": "Alice@Example.com", "role": "editor"}).m(t)
	if u["has_password"] != false {
		t.Fatalf("SSO-only user: %v", u)
	}

	t.Run("success", func(t *testing.T) {
		b := e.browser()
		b.setCookie("gateway_session", "planted-before-sso")
		a := ssoFlow(t, b, idp, nil)
		if loc := a.Header.Get("Location"); loc != "/" {
			t.Fatalf("callback redirects to %q", loc)
		}
		ck := setCookieOf(a, "gateway_session")
		if ck == nil || !ck.HttpOnly || ck.MaxAge != 7*24*3600 || ck.Value == "planted-before-sso" {
			t.Fatalf("session cookie: %+v", ck)
		}
		me := b.want(200, "GET", "/api/v1/auth/me", nil).m(t)
		user, _ := me["user"].(map[string]any)
		if me["method"] != "session" || me["role"] != "editor" || user["email"] != "Alice@Example.com" || user["last_login_at"] == nil {
			t.Fatalf("principal after SSO: %v", me)
		}
		if idp.LastToken.Get("code_verifier") == "" {
			t.Fatal("no PKCE verifier sent")
		}
		// An SSO-only account may set a first password.
		b.want(200, "PUT", "/api/v1/auth/me/password", map[string]any{"new_password": "alice-first-password"})
		e.anon().login("alice@example.com", "alice-first-password")
	})

	t.Run("replayed state", func(t *testing.T) {
		b := e.browser()
		st := b.want(303, "GET", "/api/v1/auth/sso/start", nil)
		back := b.want(302, "GET", st.Header.Get("Location"), nil)
		cb := back.Header.Get("Location")
		if a := b.want(303, "GET", cb, nil); a.Header.Get("Location") != "/" {
			t.Fatalf("first callback: %q", a.Header.Get("Location"))
		}
		wantSSOError(t, b.want(303, "GET", cb, nil), "invalid_state")
		// Unknown and missing state.
		wantSSOError(t, b.want(303, "GET", "/api/v1/auth/sso/callback?code=x&state=nope", nil), "invalid_state")
		wantSSOError(t, b.want(303, "GET", "/api/v1/auth/sso/callback?code=x", nil), "invalid_state")
	})

	t.Run("state bound to the browser", func(t *testing.T) {
		attacker, victim := e.browser(), e.browser()
		st := attacker.want(303, "GET", "/api/v1/auth/sso/start", nil)
		back := attacker.want(302, "GET", st.Header.Get("Location"), nil)
		wantSSOError(t, victim.want(303, "GET", back.Header.Get("Location"), nil), "invalid_state")
	})

	t.Run("wrong PKCE verifier", func(t *testing.T) {
		before := idp.TokenErrors
		a := ssoFlow(t, e.browser(), idp, func(u *url.URL) {
			q := u.Query()
			q.Set("code_challenge", "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") // challenge of another verifier
			u.RawQuery = q.Encode()
		})
		wantSSOError(t, a, "exchange_failed")
		if idp.TokenErrors <= before {
			t.Fatal("the provider did not refuse the verifier")
		}
	})

	t.Run("bad nonce", func(t *testing.T) {
		bad := "some-other-nonce"
		idp.NonceOverride = &bad
		defer func() { idp.NonceOverride = nil }()
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "nonce_mismatch")
	})

	t.Run("expired id_token", func(t *testing.T) {
		idp.ExpOffset = -time.Minute
		defer func() { idp.ExpOffset = 0 }()
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "id_token_expired")
	})

	t.Run("wrong audience", func(t *testing.T) {
		idp.Audience = "another-client"
		defer func() { idp.Audience = "" }()
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "invalid_id_token")
	})

	t.Run("provider error", func(t *testing.T) {
		wantSSOError(t, e.browser().want(303, "GET", "/api/v1/auth/sso/callback?error=access_denied&error_description=no", nil), "access_denied")
	})

	t.Run("unknown user without auto-provisioning", func(t *testing.T) {
		idp.User = idpUser{Email: "mallory@example.com", EmailVerified: true}
		defer func() { idp.User = idpUser{Email: "alice@example.com", EmailVerified: true, Name: "Alice"} }()
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "not_provisioned")
	})

	t.Run("auto-provisioning and allowed domains", func(t *testing.T) {
		cfg := map[string]any{"issuer": idp.Issuer(), "client_id": idp.ClientID, "auto_provision_role": "viewer", "allowed_domains": []string{"Example.org"}}
		adm.want(200, "PUT", "/api/v1/sso/config", cfg)
		defer func() { idp.User = idpUser{Email: "alice@example.com", EmailVerified: true, Name: "Alice"} }()

		idp.User = idpUser{Email: "eve@evil.test", EmailVerified: true}
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "domain_not_allowed")

		idp.User = idpUser{Email: "frank@example.org", EmailVerified: false}
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "email_not_verified")

		idp.User = idpUser{Email: "frank@example.org", EmailVerified: true, Name: "Frank"}
		b := e.browser()
		if a := ssoFlow(t, b, idp, nil); a.Header.Get("Location") != "/" {
			t.Fatalf("provisioning failed: %q", a.Header.Get("Location"))
		}
		me := b.want(200, "GET", "/api/v1/auth/me", nil).m(t)
		user := me["user"].(map[string]any)
		if me["role"] != "viewer" || user["name"] != "Frank" || user["has_password"] != false {
			t.Fatalf("provisioned user: %v", me)
		}
		b.want(403, "GET", "/api/v1/users", nil)
		// No email_verified claim at all counts as verified.
		idp.User = idpUser{Email: "grace@example.org"}
		if a := ssoFlow(t, e.browser(), idp, nil); a.Header.Get("Location") != "/" {
			t.Fatalf("provisioning without email_verified: %q", a.Header.Get("Location"))
		}
		// Any domain when allowed_domains is empty.
		cfg["allowed_domains"] = []string{}
		adm.want(200, "PUT", "/api/v1/sso/config", cfg)
		idp.User = idpUser{Email: "heidi@anywhere.test", EmailVerified: "true"}
		if a := ssoFlow(t, e.browser(), idp, nil); a.Header.Get("Location") != "/" {
			t.Fatalf("provisioning with any domain: %q", a.Header.Get("Location"))
		}
		// The client secret was kept across these PUTs (the provider
		// checks it at every code exchange).
	})

	t.Run("unicode case folding", func(t *testing.T) {
		// strings.ToLower and EqualFold fold more than ASCII: the Kelvin
		// sign K (U+212A) lowers to k and ſ (U+017F) folds to s. Neither
		// may make a provider's address another account's or an allowed
		// domain.
		defer func() { idp.User = idpUser{Email: "alice@example.com", EmailVerified: true, Name: "Alice"} }()
		adm.user("kim@example.com", "admin", "kim-password")
		idp.User = idpUser{Email: "\u212Aim@example.com", EmailVerified: true}
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "not_provisioned")
		cfg := map[string]any{"issuer": idp.Issuer(), "client_id": idp.ClientID, "auto_provision_role": "editor", "allowed_domains": []string{"startup.io"}}
		adm.want(200, "PUT", "/api/v1/sso/config", cfg)
		idp.User = idpUser{Email: "eve@\u017Ftartup.io", EmailVerified: true}
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "domain_not_allowed")
		// ASCII case still folds.
		idp.User = idpUser{Email: "KIM@Example.COM", EmailVerified: true}
		b := e.browser()
		if a := ssoFlow(t, b, idp, nil); a.Header.Get("Location") != "/" {
			t.Fatalf("ASCII case variant: %q", a.Header.Get("Location"))
		}
		if me := b.want(200, "GET", "/api/v1/auth/me", nil).m(t); me["user"].(map[string]any)["email"] != "kim@example.com" {
			t.Fatalf("signed in as %v", me)
		}
	})

	t.Run("identity binding", func(t *testing.T) {
		// Alice's account was linked to her identity (sub) at her first
		// SSO sign-in ("success"). Another identity at the provider that
		// claims her email (a provider letting users set an unverified
		// email, without an email_verified claim: "nOAuth") is refused;
		// her own identity signs in whatever email it now has.
		defer func() { idp.User = idpUser{Email: "alice@example.com", EmailVerified: true, Name: "Alice"} }()
		alice := userByEmail(t, adm, "Alice@Example.com")
		if alice["sso_linked"] != true {
			t.Fatalf("alice after her SSO sign-in: %v", alice)
		}
		if bob := userByEmail(t, adm, "kim@example.com"); bob["sso_linked"] != true {
			t.Fatalf("kim after an SSO sign-in: %v", bob)
		}
		idp.User = idpUser{Email: "alice@example.com", Sub: "mallory"}
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "identity_mismatch")

		idp.User = idpUser{Email: "alice.renamed@example.net", Sub: "sub-alice@example.com", EmailVerified: true}
		b := e.browser()
		if a := ssoFlow(t, b, idp, nil); a.Header.Get("Location") != "/" {
			t.Fatalf("linked identity with a new email: %q", a.Header.Get("Location"))
		}
		if me := b.want(200, "GET", "/api/v1/auth/me", nil).m(t); me["user"].(map[string]any)["email"] != "Alice@Example.com" {
			t.Fatalf("signed in as %v", me)
		}

		// A new email unlinks (a letter-case change does not); the next
		// sign-in with that email links the identity it comes from.
		id := fmt.Sprint(alice["id"])
		put := map[string]any{"email": "ALICE@example.com", "name": "Alice", "role": "editor"}
		if u := adm.want(200, "PUT", "/api/v1/users/"+id, put).m(t); u["sso_linked"] != true {
			t.Fatalf("a letter-case change unlinked: %v", u)
		}
		put["email"] = "alice@corp.example.com"
		if u := adm.want(200, "PUT", "/api/v1/users/"+id, put).m(t); u["sso_linked"] != false {
			t.Fatalf("an email change kept the link: %v", u)
		}
		idp.User = idpUser{Email: "alice@corp.example.com", Sub: "alice-corp", EmailVerified: true}
		if a := ssoFlow(t, e.browser(), idp, nil); a.Header.Get("Location") != "/" {
			t.Fatalf("relinking by email: %q", a.Header.Get("Location"))
		}
		idp.User = idpUser{Email: "alice@corp.example.com", Sub: "sub-alice@example.com", EmailVerified: true}
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "identity_mismatch")

		// Another client (or issuer) unlinks every account.
		cfg := map[string]any{"issuer": idp.Issuer(), "client_id": idp.ClientID, "auto_provision_role": "editor"}
		adm.want(200, "PUT", "/api/v1/sso/config", cfg)
		if u := userByEmail(t, adm, "alice@corp.example.com"); u["sso_linked"] != true {
			t.Fatalf("the same provider and client unlinked: %v", u)
		}
		idp.ClientID = "another-client"
		cfg["client_id"] = idp.ClientID
		adm.want(200, "PUT", "/api/v1/sso/config", cfg)
		for _, email := range []string{"alice@corp.example.com", "kim@example.com"} {
			if u := userByEmail(t, adm, email); u["sso_linked"] != false {
				t.Fatalf("%s still linked after a client change: %v", email, u)
			}
		}
	})

	t.Run("disable", func(t *testing.T) {
		// Disabling SSO (say, the provider was compromised) ends the
		// sessions it opened; password sessions stay.
		ssoSession := e.browser()
		if a := ssoFlow(t, ssoSession, idp, nil); a.Header.Get("Location") != "/" {
			t.Fatalf("SSO sign-in: %q", a.Header.Get("Location"))
		}
		ssoSession.want(200, "GET", "/api/v1/auth/me", nil)
		adm.user("ivan@example.com", "viewer", "ivan-password")
		pwSession := e.browser()
		pwSession.login("ivan@example.com", "ivan-password")
		st := adm.want(200, "DELETE", "/api/v1/sso/config", nil).m(t)
		ssoSession.want(401, "GET", "/api/v1/auth/me", nil)
		pwSession.want(200, "GET", "/api/v1/auth/me", nil)
		if st["enabled"] != false || st["config"] != nil {
			t.Fatalf("delete answer: %v", st)
		}
		e.anon().want(400, "GET", "/api/v1/auth/sso/start", nil)
		if sso := e.status()["sso"].(map[string]any); sso["enabled"] != false {
			t.Fatalf("status after delete: %v", sso)
		}
		var users []map[string]any
		adm.want(200, "GET", "/api/v1/users", nil).decode(t, &users)
		for _, u := range users {
			if u["sso_linked"] != false {
				t.Fatalf("linked after SSO was disabled: %v", u)
			}
		}
	})

	e.noSecret(idp.ClientSecret, "alice-first-password", "$argon2id$")
}

// userByEmail is the user with email in GET /api/v1/users.
func userByEmail(t *testing.T, adm *client, email string) map[string]any {
	t.Helper()
	var users []map[string]any
	adm.want(200, "GET", "/api/v1/users", nil).decode(t, &users)
	for _, u := range users {
		if u["email"] == email {
			return u
		}
	}
	t.Fatalf("no user %s in %v", email, users)
	return nil
}

// rawGet sends GET path to the admin listener with the Host header given
// as it is (net/http's client would refuse some) and returns the answer's
// status and Location or body.
func rawGet(t *testing.T, e *env, host, path string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.g.AdminURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != "" {
		return resp.StatusCode, loc
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSSOStartRefusesLongHost: without public_url the redirect URI of a
// pending sign-in is built from the request's Host, and an IPv6 literal
// passes the admin listener's Host check with a zone of any length
// ([::1%aaaa…]): an anonymous client stored rows of up to 1 MB (the
// listener's header limit then; 64 KiB now), 10 GB for the 10,000 pending
// sign-ins kept.
// A Host longer than a 253-character name with brackets and a port is 400
// and stores nothing.
func TestSSOStartRefusesLongHost(t *testing.T) {
	e, idp, _, _ := startSSO(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.g.AdminURL, "http://"))
	st, ans := rawGet(t, e, "[::1%"+strings.Repeat("a", 60000)+"]:"+port, "/api/v1/auth/sso/start")
	if st != 400 || !strings.Contains(ans, `"Host: longer than 261 characters`) {
		t.Fatalf("start with a 60 KB Host: %d %.300s", st, ans)
	}
	var n int64
	e.db().DB.Model(&storage.SSOState{}).Count(&n)
	if n != 0 {
		t.Fatalf("%d pending sign-ins stored", n)
	}
	// A Host of the usual length still starts a sign-in.
	if st, loc := rawGet(t, e, "[::1%lo]:"+port, "/api/v1/auth/sso/start"); st != 303 || !strings.HasPrefix(loc, idp.Issuer()) {
		t.Fatalf("start: %d %.300s", st, loc)
	}
}
