package apps_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

// session signs a user in and returns the header that carries the session.
func session(t *testing.T, g *testgw.Gateway, email, password string) http.Header {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"email": email, "password": password})
	resp, err := http.Post(g.AdminURL+"/api/v1/auth/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.Cookies()) == 0 {
		t.Fatalf("login %s: %d", email, resp.StatusCode)
	}
	h := http.Header{}
	for _, c := range resp.Cookies() {
		h.Add("Cookie", c.Name+"="+c.Value)
	}
	return h
}

// TestRoles: editors (and admins) may create applications and probe
// upstreams; viewers get 403, anonymous callers 401.
func TestRoles(t *testing.T) {
	g := testgw.Start(t, nil)
	up := upstreamServer(t, "roles")
	tok, _ := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	g.Header.Set("Authorization", "Bearer "+tok)
	const pw = "correct-horse-battery"
	g.Must("POST", "/api/v1/users", map[string]any{"email": "viewer@example.test", "role": "viewer", "password": pw})
	g.Must("POST", "/api/v1/users", map[string]any{"email": "editor@example.test", "role": "editor", "password": pw})

	app := map[string]any{"name": "r", "domain": "roles.example.test", "upstream_url": up.URL}
	probeBody := map[string]any{"upstream_url": up.URL}

	g.Header = http.Header{}
	g.WantError(401, "POST", "/api/v1/applications", app)
	g.WantError(401, "POST", "/api/v1/applications/test-upstream", probeBody)

	g.Header = session(t, g, "viewer@example.test", pw)
	g.WantError(403, "POST", "/api/v1/applications", app)
	g.WantError(403, "POST", "/api/v1/applications/test-upstream", probeBody)

	g.Header = session(t, g, "editor@example.test", pw)
	create(t, g, app)
	probe(t, g, up.URL)
}
