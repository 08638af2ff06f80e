package tests

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

// checkAnswer runs the OpenAPI answer check on a made-up answer and reports
// whether it passed.
func checkAnswer(t *testing.T, g *testgw.Gateway, method, path string, status int, body string) bool {
	t.Helper()
	ft := &fakeT{TB: t}
	req, _ := http.NewRequest(method, g.AdminURL+path, nil)
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	rec.WriteHeader(status)
	g.OpenAPI.Check(ft, req, rec.Result(), []byte(body))
	return !ft.failed
}

// Principal.user is a User or null (admin-api.md "Users, principal, SSO,
// token"), and the document says so.
func TestOpenAPIPrincipalUserIsUserOrNull(t *testing.T) {
	g := testgw.Start(t, nil)
	user := `{"id":1,"email":"a@example.com","name":"","role":"admin","has_password":true,"created_at":"2026-01-01T00:00:00Z","last_login_at":null}`
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"role":"admin","method":"open","user":null}`, true},
		{`{"role":"admin","method":"session","user":` + user + `}`, true},
		{`{"role":"admin","method":"session","user":{"id":"x"}}`, false},
		{`{"role":"admin","method":"session","user":5}`, false},
		{`{"role":"admin","method":"session","user":{"id":1,"email":"a@example.com","name":"","role":"root","has_password":true,"created_at":"2026-01-01T00:00:00Z","last_login_at":null}}`, false},
	} {
		if got := checkAnswer(t, g, "GET", "/api/v1/auth/me", 200, c.body); got != c.ok {
			t.Errorf("answer %s: passed the check = %v, want %v", c.body, got, c.ok)
		}
	}
	// The real answer validates.
	me := g.Must("GET", "/api/v1/auth/me", nil)
	if me["user"] != nil || me["method"] != "open" {
		t.Fatalf("open-mode principal: %v", me)
	}
}
