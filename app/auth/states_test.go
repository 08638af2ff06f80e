package auth_test

import (
	"strconv"
	"strings"
	"testing"
)

func wantStatus(t *testing.T, got map[string]any, auth, token, users bool) {
	t.Helper()
	if got["auth_enabled"] != auth || got["token_enabled"] != token || got["users_exist"] != users {
		t.Fatalf("status %v, want auth_enabled=%v token_enabled=%v users_exist=%v", got, auth, token, users)
	}
}

// Every row of the spec's state table, against the real admin server.
func TestStateTable(t *testing.T) {
	sub(t, "open", func(t *testing.T, e *env) {
		wantStatus(t, e.status(), false, false, false)
		c := e.anon()
		me := c.want(200, "GET", "/api/v1/auth/me", nil).m(t)
		if me["role"] != "admin" || me["method"] != "open" || me["user"] != nil {
			t.Fatalf("open principal: %v", me)
		}
		c.want(200, "GET", "/api/v1/services", nil)
		c.want(200, "GET", "/api/v1/users", nil)
		// No credentials needed, even for a bogus token: everybody is admin.
		e.withToken(strings.Repeat("0", 64)).want(200, "GET", "/api/v1/services", nil)
	})

	sub(t, "open + first user -> auth enabled", func(t *testing.T, e *env) {
		c := e.anon()
		// The first user is created without credentials.
		c.user("Root@Example.com", "admin", "correct horse")
		wantStatus(t, e.status(), true, false, true)
		c.want(401, "GET", "/api/v1/services", nil)
		c.want(401, "GET", "/api/v1/users", nil)
		c.want(401, "POST", "/api/v1/users", map[string]any{"email": "x@example.com", "role": "admin", "password": "12345678"})
		c.want(401, "POST", "/api/v1/admin/token", nil)
		c.login("root@example.com", "correct horse")
		c.want(200, "GET", "/api/v1/services", nil)
	})

	sub(t, "open + POST token -> auth enabled (token)", func(t *testing.T, e *env) {
		tok := e.anon().token()
		wantStatus(t, e.status(), true, true, false)
		e.anon().want(401, "GET", "/api/v1/services", nil)
		me := e.withToken(tok).want(200, "GET", "/api/v1/auth/me", nil).m(t)
		if me["role"] != "admin" || me["method"] != "token" || me["user"] != nil {
			t.Fatalf("token principal: %v", me)
		}
		x := e.anon()
		x.header.Set("X-Admin-Token", tok)
		x.want(200, "GET", "/api/v1/services", nil)
		// Timing-safe comparison of hashes: a wrong token of the right
		// length (and one differing in the last character only) is 401.
		e.withToken(strings.Repeat("a", 64)).want(401, "GET", "/api/v1/services", nil)
		last := "0"
		if strings.HasSuffix(tok, "0") {
			last = "1"
		}
		e.withToken(tok[:63]+last).want(401, "GET", "/api/v1/services", nil)
		e.withToken(strings.ToUpper(tok)).want(401, "GET", "/api/v1/services", nil)
		// access_token is accepted on /api/v1/events only.
		e.anon().want(401, "GET", "/api/v1/services?access_token="+tok, nil)
		e.noSecret() // (the token appears only in its creation answer, checked below)
		e.mu.Lock()
		n := 0
		for _, a := range e.answers {
			if strings.Contains(a, tok) {
				n++
			}
		}
		e.mu.Unlock()
		if n != 1 {
			t.Fatalf("the token appears in %d answers, want only its creation answer", n)
		}
	})

	sub(t, "auth enabled (token) + DELETE token, no users -> open", func(t *testing.T, e *env) {
		tok := e.anon().token()
		e.anon().want(401, "DELETE", "/api/v1/admin/token", nil)
		st := e.withToken(tok).want(200, "DELETE", "/api/v1/admin/token", nil).m(t)
		wantStatus(t, st, false, false, false)
		wantStatus(t, e.status(), false, false, false)
		e.anon().want(200, "GET", "/api/v1/services", nil)
	})

	sub(t, "auth enabled (token) + DELETE token, users exist -> auth enabled (users)", func(t *testing.T, e *env) {
		tok := e.anon().token()
		admin := e.withToken(tok)
		admin.user("admin@example.com", "admin", "admin-password")
		s := e.browser()
		s.login("admin@example.com", "admin-password")
		st := admin.want(200, "DELETE", "/api/v1/admin/token", nil).m(t)
		wantStatus(t, st, true, false, true)
		// Users keep protecting the API; the old token is gone.
		e.anon().want(401, "GET", "/api/v1/services", nil)
		admin.want(401, "GET", "/api/v1/services", nil)
		s.want(200, "GET", "/api/v1/services", nil)
	})

	sub(t, "auth enabled + POST token with current token -> rotated", func(t *testing.T, e *env) {
		old := e.anon().token()
		newTok := e.withToken(old).token()
		if newTok == old {
			t.Fatal("rotation answered the same token")
		}
		e.withToken(old).want(401, "GET", "/api/v1/services", nil)
		e.withToken(newTok).want(200, "GET", "/api/v1/services", nil)
		wantStatus(t, e.status(), true, true, false)
		// Without credentials, or with the old token: 401.
		e.anon().want(401, "POST", "/api/v1/admin/token", nil)
		e.withToken(old).want(401, "POST", "/api/v1/admin/token", nil)
		// An admin session may create it too; a viewer may not.
		adm := e.withToken(newTok)
		adm.user("a@example.com", "admin", "admin-password")
		adm.user("v@example.com", "viewer", "viewer-password")
		v := e.browser()
		v.login("v@example.com", "viewer-password")
		v.want(403, "POST", "/api/v1/admin/token", nil, "Content-Type", "application/json")
		v.want(403, "DELETE", "/api/v1/admin/token", nil, "Content-Type", "application/json")
		a := e.browser()
		a.login("a@example.com", "admin-password")
		third := a.token()
		e.withToken(newTok).want(401, "GET", "/api/v1/services", nil)
		e.withToken(third).want(200, "GET", "/api/v1/services", nil)
	})

	sub(t, "users exist but no admin: the state table still allows deleting the token", func(t *testing.T, e *env) {
		tok := e.anon().token()
		adm := e.withToken(tok)
		adm.user("v@example.com", "viewer", "viewer-password")
		adm.want(200, "DELETE", "/api/v1/admin/token", nil)
		wantStatus(t, e.status(), true, false, true)
		// Users keep protecting the API: the old token is refused.
		e.withToken(tok).want(401, "GET", "/api/v1/services", nil)
	})
}

// Role boundaries: viewer, editor, admin, and 401 without credentials.
func TestRoles(t *testing.T) {
	e := start(t)
	tok := e.anon().token()
	adm := e.withToken(tok)
	adm.user("viewer@example.com", "viewer", "viewer-password")
	adm.user("editor@example.com", "editor", "editor-password")
	adm.user("admin@example.com", "admin", "admin-password")
	viewer, editor, admin := e.browser(), e.browser(), e.browser()
	viewer.login("viewer@example.com", "viewer-password")
	editor.login("editor@example.com", "editor-password")
	admin.login("admin@example.com", "admin-password")
	svc := map[string]any{"name": "svc"}
	user := func(email string) map[string]any {
		return map[string]any{"email": email, "role": "viewer", "password": "password-123"}
	}

	// viewer: reads, nothing else
	viewer.want(200, "GET", "/api/v1/services", nil)
	viewer.want(200, "GET", "/api/v1/settings", nil)
	viewer.want(200, "GET", "/api/v1/auth/me", nil)
	viewer.want(403, "POST", "/api/v1/services", svc)
	viewer.want(403, "GET", "/api/v1/users", nil)
	viewer.want(403, "POST", "/api/v1/users", user("x1@example.com"))
	viewer.want(403, "GET", "/api/v1/sso/config", nil)
	viewer.want(403, "PUT", "/api/v1/sso/config", map[string]any{"issuer": "https://idp.example.com", "client_id": "x"})
	settings := viewer.want(200, "GET", "/api/v1/settings", nil).m(t)
	delete(settings, "updated_at")
	viewer.want(403, "PUT", "/api/v1/settings", settings)

	// editor: gateway resources, not users, SSO, settings or the token
	created := editor.want(200, "POST", "/api/v1/services", svc).m(t)
	editor.want(200, "DELETE", "/api/v1/services/"+itoa(created["id"]), nil, "Content-Type", "application/json")
	editor.want(403, "GET", "/api/v1/users", nil)
	editor.want(403, "POST", "/api/v1/users", user("x2@example.com"))
	editor.want(403, "PUT", "/api/v1/settings", settings)
	editor.want(403, "GET", "/api/v1/sso/config", nil)
	editor.want(403, "POST", "/api/v1/admin/token", nil, "Content-Type", "application/json")

	// admin: everything
	admin.want(200, "GET", "/api/v1/users", nil)
	id := admin.want(200, "POST", "/api/v1/users", user("x3@example.com")).m(t)["id"]
	admin.want(200, "DELETE", "/api/v1/users/"+itoa(id), nil, "Content-Type", "application/json")
	admin.want(200, "GET", "/api/v1/sso/config", nil)
	admin.want(200, "PUT", "/api/v1/settings", settings)
	admin.want(200, "POST", "/api/v1/services", svc)
	adm.want(200, "PUT", "/api/v1/settings", settings)

	// no credentials: 401 everywhere but the public endpoints
	anon := e.anon()
	for _, r := range [][2]string{{"GET", "/api/v1/services"}, {"GET", "/api/v1/settings"}, {"GET", "/api/v1/users"},
		{"GET", "/api/v1/auth/me"}, {"POST", "/api/v1/auth/logout"}, {"GET", "/api/v1/sso/config"}, {"PUT", "/api/v1/settings"},
		{"DELETE", "/api/v1/admin/token"}, {"GET", "/api/v1/config"}} {
		anon.want(401, r[0], r[1], nil)
	}
	anon.want(200, "GET", "/healthz", nil)
	anon.want(200, "GET", "/api/v1/admin/status", nil)
	anon.want(400, "GET", "/api/v1/auth/sso/start", nil)
	// A stale session cookie is 401 as well.
	stale := e.anon()
	stale.setCookie("gateway_session", "not-a-session")
	stale.want(401, "GET", "/api/v1/services", nil)
}

func itoa(v any) string {
	switch n := v.(type) {
	case float64:
		return strconv.FormatInt(int64(n), 10)
	case int64:
		return strconv.FormatInt(n, 10)
	}
	return ""
}
