package tests

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/certtest"
)

// TestNoSecretInCaddyConfig plants one secret of every kind the gateway
// holds and looks for each where an attacker without admin-API credentials
// could read it: Caddy's running config (its admin endpoint), Caddy's
// autosaved config and its config folder, GETs as a viewer, and the default
// export. Secrets reach Caddy's modules by reference only; so do plugin
// configs (an http-log plugin's endpoint credentials and headers, a wasm
// plugin's configuration, secret as a whole since the gateway cannot look
// into it), which viewers see redacted where declared secret.
func TestNoSecretInCaddyConfig(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("r", sid, testgw.Paths("/r"))
	certPEM, keyPEM, _ := certtest.SelfSigned(t, "secret.test")
	keyBody := strings.Split(strings.TrimSpace(keyPEM), "\n")[1] // a line of the key's base64

	const (
		keyAuthKey = "planted-key-auth-9f1c2e"
		jwtSecret  = "planted-jwt-secret-5b7a0d"
		basicPass  = "planted-basic-pass-3e8d41"
		cfToken    = "planted-cloudflare-token-77ab"
		eabKeyID   = "planted-eab-kid-41c9"
		ssoSecret  = "planted-sso-client-secret-c0ffee"
		logPass    = "planted-log-pass-61d2"
		logHeader  = "planted-log-header-0e94"
		logKey     = "planted-log-query-key-5c07"
		wasmConfig = "planted-wasm-config-8a3f"
	)
	eabMAC := base64.RawURLEncoding.EncodeToString([]byte("planted-eab-hmac-key-0123456789"))

	// Credentials of every type, used by the proxy.
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": rid})
	c := testgw.ID(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "alice"}))
	for _, cr := range []map[string]any{
		{"type": "key-auth", "key": keyAuthKey},
		{"type": "jwt", "key": "alice-iss", "secret": jwtSecret},
		{"type": "basic-auth", "username": "alice", "password": basicPass},
	} {
		g.Must("POST", fmt.Sprintf("/api/v1/consumers/%d/credentials", c), cr)
	}
	// Plugins with secrets in their config: http-log's endpoint
	// credentials and headers, and a wasm plugin's configuration.
	collector := testgw.Upstream(t, func(http.ResponseWriter, *http.Request) {})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "route", "route_id": rid, "config": map[string]any{
		"endpoint": strings.Replace(collector.URL, "http://", "http://log:"+logPass+"@", 1) + "/in?api_key=" + logKey,
		"headers":  map[string]string{"Authorization": "Bearer " + logHeader}}})
	g.Must("POST", "/api/v1/wasm-modules", map[string]any{"name": "filter", "wat": watFile(t, "filter.wat")})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "wasm", "scope": "route", "route_id": rid,
		"config": map[string]any{"module": "filter", "config": wasmConfig}})

	// A manual certificate, ACME settings with EAB and a Cloudflare token
	// for a dns-01 certificate (the directory is a closed local port: no
	// order is ever placed), and SSO.
	g.Must("POST", "/api/v1/certificates", map[string]any{"cert": certPEM, "key": keyPEM})
	dir := "https://127.0.0.1:1/directory"
	g.Must("PUT", "/api/v1/acme/eab", map[string]any{"directory_url": dir, "key_id": eabKeyID, "hmac_key": eabMAC})
	g.Must("PUT", "/api/v1/acme/cloudflare-token", map[string]any{"token": cfToken})
	settings := g.Must("GET", "/api/v1/settings", nil)
	delete(settings, "updated_at")
	settings["acme_directory_url"] = dir
	g.Must("PUT", "/api/v1/settings", settings)
	g.Must("POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"dns.secret.test"}, "challenge": "dns-01"})
	g.Must("PUT", "/api/v1/sso/config", map[string]any{"issuer": "http://127.0.0.1:1", "client_id": "gw", "client_secret": ssoSecret})

	// The proxy still authenticates with the referenced table.
	if a := g.Proxy(t, "GET", "/r", nil, "apikey", keyAuthKey); a.Status != 200 {
		t.Fatalf("key-auth through the proxy: %d %s", a.Status, a.Body)
	}

	planted := map[string]string{
		"key-auth key": keyAuthKey, "jwt secret": jwtSecret, "basic-auth password": basicPass,
		"bcrypt hash": "$2a$", "private key": keyBody, "PEM key header": "PRIVATE KEY",
		"cloudflare token": cfToken, "EAB key id": eabKeyID, "EAB MAC key": eabMAC, "SSO secret": ssoSecret,
		"http-log endpoint password": logPass, "http-log header": logHeader, "http-log endpoint's query key": logKey,
		"wasm plugin configuration": wasmConfig,
	}
	check := func(where string, body []byte) {
		t.Helper()
		for name, s := range planted {
			if strings.Contains(string(body), s) {
				t.Errorf("%s shows the %s", where, name)
			}
		}
	}

	// Caddy's admin endpoint.
	cfg := testgw.CaddyConfig(t, g.CaddyAdmin, "/config/")
	if !strings.Contains(cfg, `"consumers_ref"`) || !strings.Contains(cfg, `"gateway_acme"`) || !strings.Contains(cfg, `"api_token_ref"`) {
		t.Fatalf("the running config does not reference the gateway's state: %.2000s", cfg)
	}
	check("Caddy's /config/", []byte(cfg))

	// Caddy's config folder (autosave) must hold no generated config.
	for path, b := range testgw.CaddyConfigFiles() {
		check(path, b)
	}

	// A viewer's GETs and the default export.
	tok := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	g.Header.Set("Authorization", "Bearer "+tok)
	g.Must("POST", "/api/v1/users", map[string]any{"email": "viewer@example.com", "role": "viewer", "password": "viewer-pass"})
	_, export := g.Do("GET", "/api/v1/export", nil)
	check("the default export", export)
	viewer := g.Login("viewer@example.com", "viewer-pass")
	g.Header.Del("Authorization")
	g.Header.Set("Cookie", viewer.Get("Cookie"))
	for _, path := range []string{"/api/v1/plugins", "/api/v1/consumers", fmt.Sprintf("/api/v1/consumers/%d/credentials", c),
		"/api/v1/certificates", "/api/v1/settings", "/api/v1/acme/cloudflare-token", "/api/v1/export", "/api/v1/config", "/api/v1/auth/sso"} {
		st, body := g.Do("GET", path, nil)
		if st >= 500 {
			t.Errorf("GET %s as viewer: %d", path, st)
		}
		check("GET "+path+" as a viewer", body)
	}
}
