// Package cluster runs three gateway nodes, separate processes of the built
// binary with the shipped Caddyfile, on one PostgreSQL server started by
// the test (package internal/pgtest), and checks that they behave as one
// gateway: changes propagate, certificates are obtained once, sign-ins and
// login limits are shared, and the nodes ride out a database outage.
package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
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
	build.Dir = testgw.RepoRoot()
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the gateway binary:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is one gateway process.
type node struct {
	t     testing.TB
	name  string
	proc  *testgw.Process
	logs  *testgw.Logs
	admin string // host:port
	http  string
	https string
}

// startNode runs a gateway process with the shipped Caddyfile on dsn and
// waits until it serves its configuration; its own proxy listeners come
// from GATEWAY_NODE_HTTP(S)_LISTEN, whatever the shared settings say.
func startNode(t testing.TB, name, dsn string, extraEnv ...string) *node {
	n := &node{t: t, name: name, http: testgw.FreeAddr(t), https: testgw.FreeAddr(t)}
	n.proc = testgw.NewProcess(t, name, binary, append([]string{"GATEWAY_POSTGRES_DSN=" + dsn,
		"GATEWAY_NODE_HTTP_LISTEN=" + n.http, "GATEWAY_NODE_HTTPS_LISTEN=" + n.https}, extraEnv...)...)
	n.logs, n.admin = n.proc.Logs, n.proc.Admin
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
	n.proc.Start()
	n.proc.WaitLoaded(60 * time.Second)
}

// kill ends the process at once (SIGKILL: a crash).
func (n *node) kill() { n.proc.Kill() }

// try is one admin request: status and body (0 when the node does not
// answer).
func (n *node) try(method, path string, body any) (int, []byte) { return n.proc.Do(method, path, body) }

// must is an admin request that must answer 200; its JSON object.
func (n *node) must(method, path string, body any) map[string]any {
	n.t.Helper()
	return n.proc.Must(method, path, body)
}

// client sends the proxied requests and the sign-ins (the other admin
// requests go through testgw.Process).
var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

// get is a proxied GET through the node: status and body.
func (n *node) get(path string) (int, string) {
	resp, err := client.Get("http://" + n.http + path)
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
	s := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	})
	return strings.TrimPrefix(s.URL, "http://")
}

// service creates a service with one target on n.
func service(n *node, name, target string) int64 {
	svc := n.must("POST", "/api/v1/services", map[string]any{"name": name})
	id := testgw.ID(svc)
	host, port := testgw.HostPort(n.t, target)
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
	resp, err := n.proc.CaddyAdmin("GET", "/config/apps/gateway/generated/config_version")
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
