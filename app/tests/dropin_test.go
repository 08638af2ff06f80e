package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/poll"
	"github.com/caddy-gateway/gateway/internal/tcptest"
)

// The gateway dropped into an existing Caddy setup: the user's Caddyfile
// with site blocks of its own beside the `gateway` option.

// wantBody fails unless GET http://addr/ answers body.
func wantBody(t *testing.T, addr, body string) {
	t.Helper()
	var resp *http.Response
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for {
		if resp, err = siteClient.Get("http://" + addr + "/"); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != body {
		t.Fatalf("%s answered %d %q, want %q", addr, resp.StatusCode, b, body)
	}
}

// siteClient asks a user's site on a new connection each time, and
// wantBody asks again when the connection fails: every gateway change
// reloads Caddy's config, the user's servers with it, and a replaced
// server (a socket of its own, SO_REUSEPORT) resets what the kernel queued
// on its socket until its accept goroutine has run and the socket is
// closed, which under load can be a moment after the change answered (as
// at any Caddy reload; docs/operations.md). An idle keep-alive connection
// is closed by the reload too.
var siteClient = http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

// A change of the running config made through Caddy's own admin API (a
// user server added with POST /config/…) is kept by the configs the
// gateway compiles afterwards, also by a gateway change made at once:
// the gateway's captured base follows it.
func TestCaddyAdminChangeKeptAcrossGatewayChanges(t *testing.T) {
	site, added := testgw.FreeAddr(t), testgw.FreeAddr(t)
	g := testgw.Start(t, &testgw.Options{Apps: map[string]any{
		"http": map[string]any{"servers": map[string]any{"user": map[string]any{
			"listen": []string{site},
			"routes": []any{map[string]any{"handle": []any{map[string]any{"handler": "static_response", "body": "user site"}}}},
		}}},
	}})
	server := fmt.Sprintf(`{"listen": [%q], "routes": [{"handle": [{"handler": "static_response", "body": "added"}]}]}`, added)
	resp, err := http.Post("http://"+g.CaddyAdmin+"/config/apps/http/servers/added", "application/json", strings.NewReader(server))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST to Caddy's admin API: %d %s", resp.StatusCode, b)
	}
	wantBody(t, added, "added")
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up"))) // right away
	g.Route("all", sid, nil)
	wantBody(t, added, "added")
	wantBody(t, site, "user site")
	g.WantGet("", "/", 200)

	// The events app is the user's alone (the gateway subscribes its
	// certificate events from its own app, gateway_certificate_events):
	// a change to it through Caddy's admin API survives gateway changes.
	resp, err = http.Post("http://"+g.CaddyAdmin+"/config/apps/events", "application/json", strings.NewReader(`{"subscriptions": []}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST of an events app to Caddy's admin API: %d", resp.StatusCode)
	}
	g.Route("second", sid, map[string]any{"paths": []string{"/second"}})
	if got := testgw.CaddyConfig(t, g.CaddyAdmin, "/config/apps/events"); !strings.Contains(got, `"subscriptions":[]`) {
		t.Fatalf("the events app set through Caddy's admin API was replaced by a gateway change: %s", got)
	}
}

// dropInBinary is bin/caddy (make build), or the test is skipped.
func dropInBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(testgw.RepoRoot(), "bin", "caddy")
	if _, err := os.Stat(bin); err != nil {
		t.Skip("bin/caddy not built (make build)")
	}
	return bin
}

// userCaddyfile writes a user's Caddyfile: Caddy's admin endpoint on
// adminLine, the gateway option with the process's admin address and
// extra lines, and a site answering "site <addr>" for each of sites.
func userCaddyfile(t *testing.T, p *testgw.Process, adminLine, gatewayExtra string, sites ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\t%s\n\tgateway {\n\t\tadmin_listen %s\n\t\thttp_listen %s\n\t\thttps_listen %s\n%s\t}\n}\n",
		adminLine, p.Admin, testgw.FreeAddr(t), testgw.FreeAddr(t), gatewayExtra)
	for _, s := range sites {
		fmt.Fprintf(&b, "http://%s {\n\trespond \"site %s\"\n}\n", s, s)
	}
	if p.Caddyfile == "" {
		p.Caddyfile = filepath.Join(p.Dir, "Caddyfile")
	}
	if err := os.WriteFile(p.Caddyfile, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// `caddy reload` of an edited Caddyfile (a site added, gateway options
// changed), then a gateway change at once: the new site keeps serving,
// the old one is gone, the generated configs carry the new option, and
// the running health checks take the new health_interval.
func TestBinaryReloadEditedCaddyfile(t *testing.T) {
	bin := dropInBinary(t)
	p := testgw.NewProcess(t, "bin/caddy", bin)
	caddyAdmin := testgw.FreeAddr(t)
	admin := "admin " + caddyAdmin
	gw := "\t\tcaddy_admin " + caddyAdmin + "\n"
	site1, site2 := testgw.FreeAddr(t), testgw.FreeAddr(t)
	userCaddyfile(t, p, admin, gw+"\t\thealth_interval 1h\n", site1)
	p.Start()
	p.WaitLoaded(20 * time.Second)
	wantBody(t, site1, "site "+site1)
	// a target whose TCP checks are counted: one at once, then every hour
	var checks atomic.Int64
	_, port := testgw.HostPort(t, tcptest.Serve(t, func(c net.Conn) { checks.Add(1); c.Close() }))
	svc := p.Must("POST", "/api/v1/services", map[string]any{"name": "checked"})
	p.Must("POST", fmt.Sprintf("/api/v1/services/%v/targets", svc["id"]), map[string]any{"host": "127.0.0.1", "port": port})
	poll.Until(t, "the first check", func() bool { return checks.Load() >= 1 })

	userCaddyfile(t, p, admin, gw+"\t\twasm_memory_limit 256MiB\n\t\thealth_interval 50ms\n", site2)
	out, err := exec.Command(bin, "reload", "--config", p.Caddyfile, "--adapter", "caddyfile", "--address", caddyAdmin).CombinedOutput()
	if err != nil {
		t.Fatalf("caddy reload: %v\n%s", err, out)
	}
	p.Must("POST", "/api/v1/services", map[string]any{"name": "right-after-reload"})
	wantBody(t, site2, "site "+site2)
	if _, err := (&netClient).Get("http://" + site1 + "/"); err == nil {
		t.Fatalf("the site removed from the Caddyfile still serves")
	}
	cfg := testgw.CaddyConfig(t, caddyAdmin, "/config/apps/gateway/wasm_memory_limit")
	if strings.TrimSpace(cfg) != fmt.Sprint(256<<20) {
		t.Fatalf("wasm_memory_limit of the generated config after the reload: %s", cfg)
	}
	poll.Until(t, "checks every 50 ms after the reload", func() bool { return checks.Load() >= 5 })
}

var netClient = http.Client{Timeout: 5 * time.Second}

// With `admin off` the gateway cannot read the running config: it loads
// nothing (the user's site keeps serving; a gateway-only config would drop
// it and switch Caddy's admin endpoint on), says so in the log, and its
// admin API answers changes 503.
func TestBinaryAdminOffKeepsUserSites(t *testing.T) {
	bin := dropInBinary(t)
	p := testgw.NewProcess(t, "bin/caddy", bin)
	site := testgw.FreeAddr(t)
	userCaddyfile(t, p, "admin off", "\t\tcaddy_admin "+testgw.FreeAddr(t)+"\n", site)
	p.Start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := netClient.Get("http://" + site + "/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the user's site never served:\n%s", p.Logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for !strings.Contains(p.Logs.String(), "the gateway did not load its configuration") {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged:\n%s", p.Logs.String())
		}
		wantBody(t, site, "site "+site)
		time.Sleep(100 * time.Millisecond)
	}
	wantBody(t, site, "site "+site)
	st, body := p.Do("POST", "/api/v1/services", map[string]any{"name": "s"})
	if st != 503 || !strings.Contains(string(body), "caddy_admin") {
		t.Fatalf("a change without the running config: %d %s", st, body)
	}
	wantBody(t, site, "site "+site)
}

// `caddy validate` of a Caddyfile with the gateway option opens no store:
// no database file is created (nor a PostgreSQL schema migrated).
func TestBinaryValidateOpensNoStore(t *testing.T) {
	bin := dropInBinary(t)
	p := testgw.NewProcess(t, "bin/caddy", bin)
	userCaddyfile(t, p, "admin "+testgw.FreeAddr(t), "", testgw.FreeAddr(t))
	cmd := exec.Command(bin, "validate", "--config", p.Caddyfile, "--adapter", "caddyfile")
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), "HOME="+p.Dir, "XDG_DATA_HOME="+p.Dir, "XDG_CONFIG_HOME="+p.Dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("caddy validate: %v\n%s", err, out.String())
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "data", "gateway.db")); err == nil {
		t.Fatalf("caddy validate created the store")
	}
}

// A change of the running config through Caddy's admin API (or a `caddy
// reload`) that lands while a gateway change is being compiled: the
// gateway's config, compiled on the config before it, went live after it
// and dropped what it added (here a server) for good: the settle that load
// had started found the gateway's config live and did nothing. The
// gateway's config is refused instead (503, nothing changed), the other
// load stays live and becomes the base of the next change.
func TestCaddyAdminChangeDuringGatewayChange(t *testing.T) {
	added := testgw.FreeAddr(t)
	g := testgw.Start(t, nil)
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))

	var fired atomic.Bool
	controlplane.SetTestHookBeforeLoad(func() {
		if !fired.CompareAndSwap(false, true) {
			return
		}
		// the running config with one server more, loaded through
		// Caddy's admin API as a user would (on the change's goroutine:
		// t.Error, never t.Fatal)
		var cfg map[string]any
		resp, err := http.Get("http://" + g.CaddyAdmin + "/config/")
		if err != nil {
			t.Error(err)
			return
		}
		err = json.NewDecoder(resp.Body).Decode(&cfg)
		resp.Body.Close()
		if err != nil {
			t.Error(err)
			return
		}
		apps := cfg["apps"].(map[string]any)
		httpApp, _ := apps["http"].(map[string]any)
		if httpApp == nil {
			httpApp = map[string]any{}
			apps["http"] = httpApp
		}
		servers, _ := httpApp["servers"].(map[string]any)
		if servers == nil {
			servers = map[string]any{}
			httpApp["servers"] = servers
		}
		servers["added"] = map[string]any{"listen": []string{added},
			"routes": []any{map[string]any{"handle": []any{map[string]any{"handler": "static_response", "body": "added"}}}}}
		b, _ := json.Marshal(cfg)
		resp, err = http.Post("http://"+g.CaddyAdmin+"/load", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Error(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("POST /load to Caddy's admin API: %d %s", resp.StatusCode, body)
		}
	})
	t.Cleanup(func() { controlplane.SetTestHookBeforeLoad(nil) })

	st, body := g.Do("POST", "/api/v1/routes", map[string]any{"name": "during", "service_id": sid, "paths": []string{"/during"}})
	if st != http.StatusServiceUnavailable || !strings.Contains(string(body), "try again") {
		t.Fatalf("a gateway change overtaken by a load through Caddy's admin API answered %d %s, want 503", st, body)
	}
	if !fired.Load() {
		t.Fatal("the hook did not run")
	}
	wantBody(t, added, "added")
	if n := len(g.List("/api/v1/routes")); n != 0 {
		t.Fatalf("%d routes stored by the refused change", n)
	}

	// The next change compiles on the config with the added server.
	g.Route("after", sid, testgw.Paths("/after"))
	g.WantGet("", "/after", 200)
	wantBody(t, added, "added")
}
