package tests

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestBinaryRunsShippedCaddyfile runs bin/caddy (make build) the way `make
// run` does, with the shipped Caddyfile and its environment variables,
// creates a service, a target and a route through the admin API, proxies
// traffic, and stops it with SIGTERM: in-flight requests drain, exit 0.
func TestBinaryRunsShippedCaddyfile(t *testing.T) {
	bin := filepath.Join(testgw.RepoRoot(), "bin", "caddy")
	if _, err := os.Stat(bin); err != nil {
		t.Skip("bin/caddy not built (make build)")
	}
	proxyAddr := testgw.FreeAddr(t)
	proc := testgw.NewProcess(t, "bin/caddy", bin, "GATEWAY_HTTP_LISTEN="+proxyAddr, "GATEWAY_HTTPS_LISTEN="+testgw.FreeAddr(t))
	proc.Start()
	proc.WaitLoaded(20 * time.Second)
	logs := proc.Logs
	post := func(path string, body map[string]any) map[string]any {
		t.Helper()
		return proc.Must("POST", path, body)
	}
	up := testgw.Echo(t, "binary")
	slow := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(800 * time.Millisecond)
		_, _ = io.WriteString(w, "finished")
	})
	svc := post("/api/v1/services", map[string]any{"name": "web"})
	post(fmt.Sprintf("/api/v1/services/%d/targets", testgw.ID(svc)), map[string]any{"host": "127.0.0.1", "port": testgw.Port(up)})
	post("/api/v1/routes", map[string]any{"name": "all", "service_id": testgw.ID(svc), "paths": []string{"/"}})
	resp, err := http.Get("http://" + proxyAddr + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || testgw.DecodeEcho(t, string(b)).Path != "/hello" {
		t.Fatalf("proxied: %d %s", resp.StatusCode, b)
	}
	if _, err := os.Stat(filepath.Join(proc.Dir, "data", "gateway.db")); err != nil {
		t.Fatalf("SQLite store not under ./data: %v", err)
	}
	// Caddy's admin endpoint is a unix socket only this user can open, and
	// the gateway read the running config through it.
	if fi, err := os.Stat(proc.CaddySocket()); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("Caddy admin socket: %v %v", fi, err)
	}
	cresp, err := proc.CaddyAdmin("GET", "/config/apps/gateway/generated/version")
	if err != nil {
		t.Fatalf("Caddy admin over the socket: %v", err)
	}
	ver, _ := io.ReadAll(cresp.Body)
	cresp.Body.Close()
	if cresp.StatusCode != 200 || strings.TrimSpace(string(ver)) == "null" {
		t.Fatalf("generated config over the socket: %d %s", cresp.StatusCode, ver)
	}
	// A credential never reaches Caddy's config or the log.
	const planted = "binary-planted-key-6d1e"
	consumer := post("/api/v1/consumers", map[string]any{"username": "bin"})
	post(fmt.Sprintf("/api/v1/consumers/%d/credentials", testgw.ID(consumer)), map[string]any{"type": "key-auth", "key": planted})
	if cresp, err = proc.CaddyAdmin("GET", "/config/"); err != nil {
		t.Fatal(err)
	}
	full, _ := io.ReadAll(cresp.Body)
	cresp.Body.Close()
	if !strings.Contains(string(full), "consumers_ref") || strings.Contains(string(full)+logs.String(), planted) {
		t.Fatalf("the credential is in Caddy's config or the log:\n%s\n%s", full, logs.String())
	}

	slowSvc := post("/api/v1/services", map[string]any{"name": "slow"})
	post(fmt.Sprintf("/api/v1/services/%d/targets", testgw.ID(slowSvc)), map[string]any{"host": "127.0.0.1", "port": testgw.Port(slow)})
	post("/api/v1/routes", map[string]any{"name": "slow", "service_id": testgw.ID(slowSvc), "paths": []string{"/slow"}})

	// SIGTERM while a request is in flight: it is drained, then exit 0.
	inflight := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + proxyAddr + "/slow")
		if err != nil {
			inflight <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		inflight <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	time.Sleep(200 * time.Millisecond)
	_ = proc.Signal(syscall.SIGTERM)
	if got := <-inflight; got != "200 finished" {
		t.Fatalf("in-flight request at SIGTERM: %s", got)
	}
	select {
	case <-proc.Done():
		if err := proc.Err(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit after SIGTERM\n%s", logs.String())
	}
}
