package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

// TestBinaryRunsShippedCaddyfile runs bin/caddy (make build) the way `make
// run` does, with the shipped Caddyfile and its environment variables,
// creates a service, a target and a route through the admin API, proxies
// traffic, and stops it with SIGTERM: in-flight requests drain, exit 0.
func httptestServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func TestBinaryRunsShippedCaddyfile(t *testing.T) {
	bin, _ := filepath.Abs("../../bin/caddy")
	if _, err := os.Stat(bin); err != nil {
		t.Skip("bin/caddy not built (make build)")
	}
	caddyfile, _ := filepath.Abs("../../Caddyfile")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil { // as make run does
		t.Fatal(err)
	}
	adminAddr, proxyAddr := testgw.FreeAddr(t), testgw.FreeAddr(t)
	cmd := exec.Command(bin, "run", "--config", caddyfile, "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GATEWAY_ADMIN_LISTEN="+adminAddr, "GATEWAY_HTTP_LISTEN="+proxyAddr,
		"GATEWAY_HTTPS_LISTEN="+testgw.FreeAddr(t),
		"XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	admin := "http://" + adminAddr
	post := func(path, body string) map[string]any {
		t.Helper()
		var resp *http.Response
		var err error
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err = http.Post(admin+path, "application/json", strings.NewReader(body))
			if err == nil && resp.StatusCode == 200 {
				break
			}
			if resp != nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				err = fmt.Errorf("%d %s", resp.StatusCode, b)
			}
			if time.Now().After(deadline) {
				t.Fatalf("POST %s: %v\n%s", path, err, logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	up := testgw.Echo(t, "binary")
	slow := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(800 * time.Millisecond)
		_, _ = io.WriteString(w, "finished")
	})
	svc := post("/api/v1/services", `{"name":"web"}`)
	post(fmt.Sprintf("/api/v1/services/%d/targets", testgw.ID(svc)), fmt.Sprintf(`{"host":"127.0.0.1","port":%d}`, port(up)))
	post("/api/v1/routes", fmt.Sprintf(`{"name":"all","service_id":%d,"paths":["/"]}`, testgw.ID(svc)))
	resp, err := http.Get("http://" + proxyAddr + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || testgw.DecodeEcho(t, string(b)).Path != "/hello" {
		t.Fatalf("proxied: %d %s", resp.StatusCode, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "gateway.db")); err != nil {
		t.Fatalf("SQLite store not under ./data: %v", err)
	}
	// Caddy's admin endpoint is a unix socket only this user can open, and
	// the gateway read the running config through it.
	sock := filepath.Join(dir, "data", "caddy-admin.sock")
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("Caddy admin socket: %v %v", fi, err)
	}
	cresp, err := caddycmd.AdminAPIRequest("unix/"+sock, "GET", "/config/apps/gateway/generated/version", nil, nil)
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
	consumer := post("/api/v1/consumers", `{"username":"bin"}`)
	post(fmt.Sprintf("/api/v1/consumers/%d/credentials", testgw.ID(consumer)), `{"type":"key-auth","key":"`+planted+`"}`)
	if cresp, err = caddycmd.AdminAPIRequest("unix/"+sock, "GET", "/config/", nil, nil); err != nil {
		t.Fatal(err)
	}
	full, _ := io.ReadAll(cresp.Body)
	cresp.Body.Close()
	if !strings.Contains(string(full), "consumers_ref") || strings.Contains(string(full)+logs.String(), planted) {
		t.Fatalf("the credential is in Caddy's config or the log:\n%s\n%s", full, logs.String())
	}

	slowSvc := post("/api/v1/services", `{"name":"slow"}`)
	post(fmt.Sprintf("/api/v1/services/%d/targets", testgw.ID(slowSvc)), fmt.Sprintf(`{"host":"127.0.0.1","port":%d}`, port(slow)))
	post("/api/v1/routes", fmt.Sprintf(`{"name":"slow","service_id":%d,"paths":["/slow"]}`, testgw.ID(slowSvc)))

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
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if got := <-inflight; got != "200 finished" {
		t.Fatalf("in-flight request at SIGTERM: %s", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit after SIGTERM\n%s", logs.String())
	}
}
