// Package cluster runs three gateway nodes, separate processes of the built
// binary with the shipped Caddyfile, on one PostgreSQL server started by
// the test (package internal/pgtest), and checks that they behave as one
// gateway: changes propagate, certificates are obtained once, sign-ins and
// login limits are shared, and the nodes ride out a database outage.
package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/pgtest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gateway-cluster-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "caddy")
	build := exec.Command("go", "build", "-o", binary, "./cmd/caddy")
	build.Dir = "../../.."
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the gateway binary:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a log shared by a process and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// node is one gateway process.
type node struct {
	t         testing.TB
	name      string
	dir       string
	env       []string
	admin     string // host:port
	http      string
	https     string
	cookie    string // session cookie sent with admin requests
	logs      *syncBuffer
	cmd       *exec.Cmd
	done      chan struct{}
	adminHTTP *http.Client
}

// startNode runs a gateway process with the shipped Caddyfile on dsn; seed
// is the settings' http_listen of a fresh store (the nodes' own listeners
// come from GATEWAY_NODE_HTTP(S)_LISTEN).
func startNode(t testing.TB, name, dsn string, extraEnv ...string) *node {
	caddyfile, _ := filepath.Abs("../../../Caddyfile")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, name: name, dir: dir, admin: testgw.FreeAddr(t), http: testgw.FreeAddr(t), https: testgw.FreeAddr(t),
		adminHTTP: &http.Client{Timeout: 30 * time.Second}}
	n.env = append(os.Environ(),
		"GATEWAY_POSTGRES_DSN="+dsn,
		"GATEWAY_ADMIN_LISTEN="+n.admin,
		"GATEWAY_NODE_HTTP_LISTEN="+n.http, "GATEWAY_NODE_HTTPS_LISTEN="+n.https,
		"XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	n.env = append(n.env, extraEnv...)
	n.env = append(n.env, "CADDYFILE="+caddyfile)
	n.start()
	t.Cleanup(func() {
		n.kill()
		if t.Failed() {
			t.Logf("--- logs of %s ---\n%s", n.name, n.logs.String())
		}
	})
	return n
}

// start runs the process (again) and waits until it serves its stored
// configuration.
func (n *node) start() {
	n.t.Helper()
	var caddyfile string
	for _, e := range n.env {
		if v, ok := strings.CutPrefix(e, "CADDYFILE="); ok {
			caddyfile = v
		}
	}
	if n.logs == nil {
		n.logs = &syncBuffer{}
	}
	cmd := exec.Command(binary, "run", "--config", caddyfile, "--adapter", "caddyfile")
	cmd.Dir = n.dir
	cmd.Env = n.env
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.cmd = cmd
	n.done = make(chan struct{})
	done := n.done
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, body := n.try("GET", "/api/v1/config", nil)
		var cfg map[string]any
		if st == 200 && json.Unmarshal(body, &cfg) == nil && cfg["applied_at"] != nil {
			return
		}
		select {
		case <-done:
			n.t.Fatalf("%s exited at start:\n%s", n.name, n.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s did not load its configuration: %d %s\n%s", n.name, st, body, n.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill ends the process at once (SIGKILL: a crash).
func (n *node) kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
	n.cmd = nil
}

// try is one admin request: status and body (0 when the node does not
// answer).
func (n *node) try(method, path string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+n.admin+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if n.cookie != "" {
		req.Header.Set("Cookie", n.cookie)
	}
	resp, err := n.adminHTTP.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// must is an admin request that must answer 200; its JSON object.
func (n *node) must(method, path string, body any) map[string]any {
	n.t.Helper()
	st, b := n.try(method, path, body)
	if st != 200 {
		n.t.Fatalf("%s %s on %s: %d %s", method, path, n.name, st, b)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

var proxyClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

// get is a proxied GET through the node: status and body.
func (n *node) get(path string) (int, string) {
	resp, err := proxyClient.Get("http://" + n.http + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitServes waits until a proxied GET of path through n answers 200 with
// body containing want.
func (n *node) waitServes(path, want string, within time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, body := n.get(path)
		if st == 200 && strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s does not serve %s within %v: %d %s", n.name, path, within, st, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *node) configVersion() int64 {
	n.t.Helper()
	return int64(n.must("GET", "/api/v1/config", nil)["version"].(float64))
}

// upstream answers "<name> <path>".
func upstream(t testing.TB, name string) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func hostPort(addr string) (string, int) {
	var host string
	var port int
	i := strings.LastIndex(addr, ":")
	host = addr[:i]
	fmt.Sscan(addr[i+1:], &port)
	return host, port
}

// service creates a service with one target on n.
func service(n *node, name, target string) int64 {
	svc := n.must("POST", "/api/v1/services", map[string]any{"name": name})
	id := testgw.ID(svc)
	host, port := hostPort(target)
	n.must("POST", fmt.Sprintf("/api/v1/services/%d/targets", id), map[string]any{"host": host, "port": port})
	return id
}

// threeNodes starts PostgreSQL and three nodes: node 1 with the libpq
// keyword/value DSN, nodes 2 and 3 with the URL form (both from
// GATEWAY_POSTGRES_DSN through the shipped Caddyfile).
func threeNodes(t testing.TB, extraEnv ...string) (*pgtest.Server, []*node) {
	pg := pgtest.Start(t)
	n1 := startNode(t, "node1", pg.DSN, extraEnv...)
	n2 := startNode(t, "node2", pg.URL(), extraEnv...)
	n3 := startNode(t, "node3", pg.URL(), extraEnv...)
	return pg, []*node{n1, n2, n3}
}

// CheckPeriodForTest is the nodes' periodic version check
// (cluster.CheckInterval).
const CheckPeriodForTest = 3 * time.Second

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// liveVersion is the stored version of the config the node's Caddy runs,
// read from Caddy's own admin socket (works while the database is down).
func (n *node) liveVersion() int64 {
	n.t.Helper()
	resp, err := caddycmd.AdminAPIRequest("unix/"+filepath.Join(n.dir, "data", "caddy-admin.sock"), "GET", "/config/apps/gateway/generated/config_version", nil, nil)
	if err != nil {
		n.t.Fatalf("Caddy admin of %s: %v", n.name, err)
	}
	defer resp.Body.Close()
	var v int64
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		n.t.Fatalf("config_version of %s: %v", n.name, err)
	}
	return v
}
