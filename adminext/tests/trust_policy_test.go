package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

// Trust-boundary policies checked through the real gateway: what a plugin
// config or a proxied request must never be able to do.

// caddyConfig reads a path of the running Caddy config from Caddy's own
// admin endpoint.
func caddyConfig(t *testing.T, g *testgw.Gateway, path string, out any) {
	t.Helper()
	resp, err := http.Get("http://" + g.CaddyAdmin + "/config/" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /config/%s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET /config/%s: %q: %v", path, b, err)
	}
}

// TestTrustACMENeverTouchesTrustStore: every compiled config tells Caddy's
// pki app not to install its local root (the base config's own CAs too),
// and ACME names are public DNS names (an IP would need Caddy's internal
// CA).
func TestTrustACMENeverTouchesTrustStore(t *testing.T) {
	// (No CA with trust installation in the base config here: Caddy's
	// first, hand-written load would install it on this machine.)
	g := testgw.Start(t, nil)
	g.Service("s") // any mutation compiles and loads a config
	var pki struct {
		CAs map[string]struct {
			InstallTrust *bool `json:"install_trust"`
		} `json:"certificate_authorities"`
	}
	caddyConfig(t, g, "apps/pki", &pki)
	if ca, ok := pki.CAs["local"]; !ok || ca.InstallTrust == nil || *ca.InstallTrust {
		t.Errorf("pki CAs %+v: want local with install_trust false", pki.CAs)
	}
	for _, bad := range []string{"127.0.0.1", "::1", "localhost"} {
		g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"a.example.com", bad}}, "domains[1]")
	}
}

// TestTrustCORSCredentialsNeedOrigins: allow_origins * with
// allow_credentials is refused (it would echo any origin, null included,
// with credentials), as in APISIX.
func TestTrustCORSCredentialsNeedOrigins(t *testing.T) {
	g := testgw.Start(t, nil)
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "cors", "scope": "global",
		"config": map[string]any{"allow_credentials": true}}, "config.allow_credentials")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "cors", "scope": "global",
		"config": map[string]any{"allow_origins": []string{"https://a.example", "*"}, "allow_credentials": true}}, "config.allow_credentials")
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "cors", "scope": "global",
		"config": map[string]any{"allow_origins": []string{"https://*.example.com"}, "allow_credentials": true}})
}
