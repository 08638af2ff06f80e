package auth_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestSSOCallbackDuringReconfiguration, on SQLite and on PostgreSQL: SSO
// disabled, or moved to another provider or client, while a callback waits
// for the provider's token answer makes that callback fail as
// not_configured (what it answers when SSO is not configured), with no
// session, no provisioned account and no link. The callback read the
// configuration at its start only: after the admin's DELETE had ended the
// sessions SSO opened and unlinked every account, it still provisioned or
// linked the account with the old configuration and signed the user in.
func TestSSOCallbackDuringReconfiguration(t *testing.T) {
	testgw.EachStore(t, ssoCallbackDuringReconfiguration)
}

func ssoCallbackDuringReconfiguration(t *testing.T, g *testgw.Gateway) {
	idp, other := newIDP(t), newIDP(t)
	tok := (&env{t: t, g: g}).anon().token()
	config := func(p *fakeIDP, clientID string) map[string]any {
		return map[string]any{"issuer": p.Issuer(), "client_id": clientID, "client_secret": p.ClientSecret, "auto_provision_role": "editor"}
	}
	for _, tc := range []struct {
		name     string
		email    string
		existing bool // an account with the email exists, not linked
		change   func(adm *client)
		signedIn bool
	}{
		// The control: held the same way, a callback nobody races signs in.
		{name: "unchanged", email: "first@example.com", change: func(*client) {}, signedIn: true},
		{name: "disabled", email: "new@example.com",
			change: func(adm *client) { adm.want(200, "DELETE", "/api/v1/sso/config", nil) }},
		{name: "disabled, existing account", email: "old@example.com", existing: true,
			change: func(adm *client) { adm.want(200, "DELETE", "/api/v1/sso/config", nil) }},
		{name: "another provider", email: "moved@example.com",
			change: func(adm *client) { adm.want(200, "PUT", "/api/v1/sso/config", config(other, other.ClientID)) }},
		{name: "another client", email: "client@example.com", existing: true,
			change: func(adm *client) { adm.want(200, "PUT", "/api/v1/sso/config", config(idp, "another-client")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{t: t, g: g}
			adm := e.withToken(tok)
			adm.want(200, "PUT", "/api/v1/sso/config", config(idp, idp.ClientID))
			if tc.existing {
				adm.want(200, "POST", "/api/v1/users", map[string]any{"email": tc.email, "role": "viewer"})
			}
			idp.mu.Lock()
			idp.User = idpUser{Email: tc.email, EmailVerified: true}
			idp.mu.Unlock()

			b := e.browser()
			st := b.want(303, "GET", "/api/v1/auth/sso/start", nil)
			back := b.want(302, "GET", st.Header.Get("Location"), nil)
			arrived, release := idp.holdTokens()
			t.Cleanup(release)
			done := make(chan answer, 1)
			go func() { done <- b.do("GET", back.Header.Get("Location"), nil) }()
			select {
			case <-arrived:
			case a := <-done:
				t.Fatalf("the callback answered %d (%s) before it asked for the tokens", a.Status, a.Header.Get("Location"))
			case <-time.After(10 * time.Second):
				t.Fatal("the callback did not ask the provider for the tokens")
			}
			tc.change(adm)
			release()
			a := <-done
			if a.Status != 303 {
				t.Fatalf("the callback answered %d: %s", a.Status, a.Body)
			}

			var users []map[string]any
			adm.want(200, "GET", "/api/v1/users", nil).decode(t, &users)
			var u map[string]any
			for _, x := range users {
				if x["email"] == tc.email {
					u = x
				}
			}
			if tc.signedIn {
				if loc := a.Header.Get("Location"); loc != "/" || setCookieOf(a, "gateway_session") == nil {
					t.Fatalf("the callback redirected to %q without a session", loc)
				}
				b.want(200, "GET", "/api/v1/auth/me", nil)
				if u == nil || u["sso_linked"] != true {
					t.Fatalf("the signed-in account: %v", u)
				}
				return
			}
			var wrong []string
			if reason := ssoError(t, a); reason != "not_configured" {
				wrong = append(wrong, fmt.Sprintf("sso_error %q, want not_configured", reason))
			}
			if setCookieOf(a, "gateway_session") != nil {
				wrong = append(wrong, "a session cookie was set")
			}
			if st := b.do("GET", "/api/v1/auth/me", nil).Status; st != 401 {
				wrong = append(wrong, fmt.Sprintf("GET /api/v1/auth/me answers %d, want 401", st))
			}
			switch {
			case !tc.existing && u != nil:
				wrong = append(wrong, fmt.Sprintf("an account was provisioned: %v", u))
			case tc.existing && (u == nil || u["sso_linked"] != false):
				wrong = append(wrong, fmt.Sprintf("the existing account is linked: %v", u))
			}
			if len(wrong) > 0 {
				t.Fatalf("after the callback: %s", strings.Join(wrong, "; "))
			}
		})
	}
}
