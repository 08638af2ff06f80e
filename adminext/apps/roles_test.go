package apps_test

import (
	"net/http"
	"testing"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

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

	g.Header = g.Login("viewer@example.test", pw)
	g.WantError(403, "POST", "/api/v1/applications", app)
	g.WantError(403, "POST", "/api/v1/applications/test-upstream", probeBody)

	g.Header = g.Login("editor@example.test", pw)
	create(t, g, app)
	probe(t, g, up.URL)
}
