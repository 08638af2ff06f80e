package tests

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/poll"
)

// A mutation whose config cannot go live (here: a listener address that is
// taken) is answered 400, leaves the store as it was and the proxy serving.
func TestFailedMutationKeepsLastGoodConfig(t *testing.T) {
	g, sid := echoGateway(t)
	g.Route("all", sid, nil)
	before := g.Must("GET", "/api/v1/settings", nil)
	version := g.Must("GET", "/api/v1/config", nil)["version"]

	failListenChange(t, g)

	after := g.Must("GET", "/api/v1/settings", nil)
	if after["http_listen"] != before["http_listen"] || after["updated_at"] != before["updated_at"] {
		t.Fatalf("settings changed by a failed mutation: %v → %v", before, after)
	}
	if v := g.Must("GET", "/api/v1/config", nil)["version"]; v != version {
		t.Fatalf("live version moved from %v to %v", version, v)
	}
	g.WantGet("", "/x", 200) // the proxy still serves after a failed mutation
	// And the gateway still takes mutations.
	g.Route("more", sid, testgw.Paths("/more"))
}

// Listener changes apply at once: the new address serves, the old closes.
func TestSettingsListenerChangeAppliesLive(t *testing.T) {
	g, sid := echoGateway(t)
	g.Route("all", sid, nil)
	old := g.ProxyURL
	newAddr := testgw.FreeAddr(t)
	got := g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": newAddr})
	if got["http_listen"] != newAddr || got["https_listen"] == "" || got["acme_directory_url"] != "letsencrypt" {
		t.Fatalf("settings answer: %v", got)
	}
	resp, err := http.Get("http://" + newAddr + "/x")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("new listener: %v %v", resp, err)
	}
	resp.Body.Close()
	poll.Until(t, "old listener closed", func() bool {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
		resp, err := c.Get(old + "/x")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
}

// When the store becomes unreachable, proxied traffic is unaffected; the
// admin API answers 503 (the database is unreachable, nothing changed)
// instead of pretending.
func TestStoreUnreachableProxyUnaffected(t *testing.T) {
	g := testgw.Start(t, &testgw.Options{NoOpenAPICheck: true})
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("all", sid, nil)
	sqlDB, err := controlplane.Current().Store().DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.Close()
	for i := 0; i < 20; i++ {
		g.WantGet("", fmt.Sprintf("/x/%d", i), 200) // and with the store down
	}
	st, body := g.Do("POST", "/api/v1/services", map[string]any{"name": "x"})
	wantError(t, st, body, 503, "the database is unreachable")
	st, _ = g.Do("GET", "/api/v1/services", nil)
	if st != 503 {
		t.Fatalf("list with the store down: %d", st)
	}
	g.WantGet("", "/after", 200) // and after failed mutations
}

// Site blocks the user already has keep serving beside the gateway, also
// across gateway mutations.
func TestUserSitesKeepWorking(t *testing.T) {
	site := testgw.FreeAddr(t)
	g := testgw.Start(t, &testgw.Options{Apps: map[string]any{
		"http": map[string]any{"servers": map[string]any{"user": map[string]any{
			"listen": []string{site},
			"routes": []any{map[string]any{"handle": []any{map[string]any{"handler": "static_response", "body": "user site"}}}},
		}}},
	}})
	wantBody(t, site, "user site")
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("all", sid, nil)
	wantBody(t, site, "user site")
	g.WantGet("", "/", 200) // the gateway route
}

// A restart serves the stored configuration.
func TestRestartServesStoredConfig(t *testing.T) {
	g2 := testgw.Start(t, &testgw.Options{DSN: storedEchoRoute(t)})
	if st, body, _ := g2.Get("", "/x"); st != 200 {
		t.Fatalf("after restart: %d %s", st, body)
	}
}

// storedEchoRoute runs a gateway just long enough to store a route of
// every request to an echo upstream (answering 200), stops it and returns
// its store's DSN for a restart.
func storedEchoRoute(t *testing.T) string {
	t.Helper()
	g, sid := echoGateway(t)
	g.Route("all", sid, nil)
	if err := stopGateway(); err != nil {
		t.Fatal(err)
	}
	return g.DSN
}

// failListenChange makes a settings change that cannot go live (its
// listener address is taken) and checks it is answered 400 naming the
// field.
func failListenChange(t *testing.T, g *testgw.Gateway) {
	t.Helper()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	st, body := g.Do("PUT", "/api/v1/settings", map[string]any{"http_listen": taken.Addr().String()})
	wantError(t, st, body, 400, "http_listen")
}

// A first load whose gateway cannot start (its admin port is taken)
// leaves no control plane behind: the next load serves its own admin
// address and store, without a restart.
func TestFailedFirstLoadLeavesNoControlPlane(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := fmt.Sprintf(`{"admin": {"listen": %q}, "logging": {"logs": {"default": {"level": "ERROR"}}},
		"apps": {"gateway": {"admin_listen": %q, "dsn": %q, "http_listen": %q, "https_listen": %q}}}`,
		testgw.FreeAddr(t), busy.Addr().String(), filepath.Join(t.TempDir(), "gateway.db"), testgw.FreeAddr(t), testgw.FreeAddr(t))
	if err := caddy.Load([]byte(cfg), true); err == nil || !strings.Contains(err.Error(), "address already in use") {
		_ = caddy.Stop()
		t.Fatalf("loaded with the admin port taken: %v", err)
	}
	if cp := controlplane.Current(); cp != nil {
		t.Fatalf("a control plane (admin %q) outlived the failed load", cp.AdminAddr())
	}
	g := testgw.Start(t, nil) // fails if it inherits the failed one's admin address
	g.Must("GET", "/api/v1/settings", nil)
}
