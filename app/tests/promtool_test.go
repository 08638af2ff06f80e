package tests

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/poll"
)

// promtool returns the path of Prometheus' checker. Without it the test
// skips, and fails on CI (make test-deps installs Debian's prometheus).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("promtool (Debian package prometheus) is required on CI: %v", err)
		}
		t.Skipf("promtool not installed (make test-deps installs prometheus)")
	}
	return p
}

// TestMetricsPassPromtool: GET /metrics, after traffic of every kind the
// exposition has series for (routes, an unmatched request, a 502, a
// consumer, an unhealthy target, a TCP stream route), passes
// `promtool check metrics`, Prometheus' own checker (its lint included:
// a quantile label belongs to a summary only).
func TestMetricsPassPromtool(t *testing.T) {
	tool := promtool(t)

	// A stream route binds at start: store it, then restart.
	first := testgw.Start(t, nil)
	listen := testgw.FreeAddr(t)
	tcp := first.Service("tcp", testgw.TCPEcho(t, "one"))
	first.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "tcp", "listen_addr": listen, "service_id": tcp})
	dsn := first.DSN
	if err := stopGateway(); err != nil {
		t.Fatal(err)
	}
	g := testgw.Start(t, &testgw.Options{DSN: dsn, HealthInterval: 50 * time.Millisecond})

	up, gone := testgw.Echo(t, "up"), testgw.Echo(t, "gone")
	sid := g.Service("s", testgw.Addr(up), testgw.Addr(gone))
	g.Route("open", sid, testgw.Paths("/open"))
	keyed := g.Route("keyed", sid, testgw.Paths("/keyed"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": keyed})
	g.Consumer("alice", map[string]any{"type": "key-auth", "key": "k-alice"})
	g.Route("dead", g.DeadService("dead"), testgw.Paths("/dead"))
	gone.Close()
	poll.Until(t, "a target unhealthy", func() bool { return healthState(g, testgw.Port(gone)) == "unhealthy" })

	for i := 0; i < 5; i++ {
		g.WantGet("", "/open", 200)
	}
	g.WantGet("", "/keyed", 401)
	if a := g.Proxy(t, "GET", "/keyed", nil, "apikey", "k-alice"); a.Status != 200 {
		t.Fatalf("keyed request: %d %s", a.Status, a.Body)
	}
	g.WantGet("", "/dead", 502)
	g.WantGet("", "/nowhere", 404)
	if got, err := testgw.TCPSay(listen, "hi"); err != nil || got != "one: hi" {
		t.Fatalf("through the stream route: %q %v", got, err)
	}

	resp, err := http.Get(g.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"gateway_recent_latency_seconds{", "gateway_consumer_requests_total{",
		"gateway_target_healthy{", "gateway_stream_connections_total{", "gateway_route_errors_total{"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Fatalf("/metrics lacks %s:\n%s", want, body)
		}
	}
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("promtool check metrics: %v\n%s\n/metrics:\n%s", err, out, body)
	}
}
