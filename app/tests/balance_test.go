package tests

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/poll"
)

// countByName sends n proxied requests and counts which upstream answered.
func countByName(t *testing.T, g *testgw.Gateway, n int, header func(i int) http.Header) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest("GET", g.ProxyURL+"/", nil)
		if header != nil {
			req.Header = header(i)
		}
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b [4096]byte
		k, _ := resp.Body.Read(b[:])
		resp.Body.Close()
		if resp.StatusCode != 200 {
			counts[fmt.Sprint(resp.StatusCode)]++
			continue
		}
		counts[testgw.DecodeEcho(t, string(b[:k])).Name]++
	}
	return counts
}

func setAlgorithm(t *testing.T, g *testgw.Gateway, sid int64, alg string, retries int) {
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", sid), map[string]any{"name": "s", "lb_algorithm": alg, "retries": retries})
}

func TestLoadBalancingAlgorithms(t *testing.T) {
	g := testgw.Start(t, nil)
	a, b, c := testgw.Echo(t, "a"), testgw.Echo(t, "b"), testgw.Echo(t, "c")
	sid := g.Service("s", testgw.Addr(a), testgw.Addr(b))
	// c has weight 0: out of rotation for every algorithm.
	g.Must("POST", fmt.Sprintf("/api/v1/services/%d/targets", sid), map[string]any{"host": "127.0.0.1", "port": testgw.Port(c), "weight": 0})
	g.Route("all", sid, nil)

	t.Run("round_robin ignores weights", func(t *testing.T) {
		got := countByName(t, g, 30, nil)
		if got["a"] != 15 || got["b"] != 15 {
			t.Fatalf("round robin: %v", got)
		}
	})
	t.Run("a disabled target gets no traffic", func(t *testing.T) {
		var targets []map[string]any
		g.JSON("GET", fmt.Sprintf("/api/v1/services/%d/targets", sid), nil, &targets)
		path := fmt.Sprintf("/api/v1/targets/%d", testgw.ID(targets[1]))
		g.Must("PUT", path, map[string]any{"host": "127.0.0.1", "port": testgw.Port(b), "enabled": false})
		if got := countByName(t, g, 10, nil); got["a"] != 10 {
			t.Fatalf("with b disabled: %v", got)
		}
		g.Must("PUT", path, map[string]any{"host": "127.0.0.1", "port": testgw.Port(b)})
	})
	t.Run("weighted is smooth weighted round-robin", func(t *testing.T) {
		var targets []map[string]any
		g.JSON("GET", fmt.Sprintf("/api/v1/services/%d/targets", sid), nil, &targets)
		g.Must("PUT", fmt.Sprintf("/api/v1/targets/%d", testgw.ID(targets[1])), map[string]any{"host": "127.0.0.1", "port": testgw.Port(b), "weight": 300})
		setAlgorithm(t, g, sid, "weighted", 1)
		got := countByName(t, g, 40, nil)
		if got["a"] != 10 || got["b"] != 30 || got["c"] != 0 {
			t.Fatalf("weighted 100:300:0 over 40 requests: %v", got)
		}
	})
	t.Run("random spreads", func(t *testing.T) {
		setAlgorithm(t, g, sid, "random", 1)
		got := countByName(t, g, 200, nil)
		if got["a"] < 40 || got["b"] < 40 || got["c"] != 0 {
			t.Fatalf("random: %v", got)
		}
	})
	t.Run("consistent keeps each client on its target", func(t *testing.T) {
		g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "trusted_proxies": []string{"127.0.0.1/32"}})
		setAlgorithm(t, g, sid, "consistent", 1)
		first := map[int]string{}
		seen := map[string]bool{}
		for round := 0; round < 3; round++ {
			for ip := 1; ip <= 20; ip++ {
				got := countByName(t, g, 1, func(int) http.Header {
					return http.Header{"X-Forwarded-For": {fmt.Sprintf("10.0.0.%d", ip)}}
				})
				for name := range got {
					seen[name] = true
					if round == 0 {
						first[ip] = name
					} else if first[ip] != name {
						t.Fatalf("client 10.0.0.%d moved from %s to %s", ip, first[ip], name)
					}
				}
			}
		}
		if !seen["a"] || !seen["b"] || seen["c"] {
			t.Fatalf("20 clients all on one target or on a weight-0 one: %v", seen)
		}
	})
}

func TestSplits(t *testing.T) {
	g := testgw.Start(t, nil)
	s1 := g.Service("one", testgw.Addr(testgw.Echo(t, "one")))
	s2 := g.Service("two", testgw.Addr(testgw.Echo(t, "two")))
	g.Route("canary", s1, map[string]any{"splits": []any{
		map[string]any{"service_id": s1, "weight": 1}, map[string]any{"service_id": s2, "weight": 3}}})
	got := countByName(t, g, 400, nil)
	if got["one"]+got["two"] != 400 || got["one"] < 60 || got["one"] > 140 {
		t.Fatalf("1:3 split over 400 requests: %v", got)
	}
}

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

func TestRetriesGoToOtherTargets(t *testing.T) {
	g := testgw.Start(t, nil)
	live := testgw.Echo(t, "live")
	sid := g.Service("s", deadAddr(t), testgw.Addr(live))
	g.Route("all", sid, nil)
	setAlgorithm(t, g, sid, "round_robin", 1)
	got := countByName(t, g, 20, nil)
	if got["live"] != 20 {
		t.Fatalf("with one retry every request must reach the live target: %v", got)
	}
	// Without retries, requests given to the dead target fail with 502.
	sid2 := g.Service("s2", deadAddr(t), deadAddr(t))
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", sid2), map[string]any{"name": "s2", "retries": 0})
	g.Route("dead", sid2, testgw.Paths("/dead"))
	st, body, _ := g.Get("", "/dead")
	if st != 502 {
		t.Fatalf("all targets dead: %d %s", st, body)
	}
	wantError(t, st, []byte(body), 502, "Bad Gateway")
}

// flaky is an upstream whose /health answers 500 while sick is set.
func flaky(t *testing.T, name string, sick *atomic.Bool) *httptest.Server {
	s := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			if sick.Load() {
				w.WriteHeader(500)
			}
			return
		}
		fmt.Fprintf(w, `{"name":%q}`, name)
	})
	return s
}

func healthState(g *testgw.Gateway, targetPort int) string {
	var hs []map[string]any
	g.JSON("GET", "/api/v1/health", nil, &hs)
	for _, h := range hs {
		if h["port"] == float64(targetPort) {
			s, _ := h["state"].(string)
			return s
		}
	}
	return "missing"
}

func TestHealthCheckFailoverSurvivesReloads(t *testing.T) {
	g := testgw.Start(t, &testgw.Options{HealthInterval: 50 * time.Millisecond})
	var sickA, sickB atomic.Bool
	a, b := flaky(t, "a", &sickA), flaky(t, "b", &sickB)
	sid := g.Service("s", testgw.Addr(a), testgw.Addr(b))
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", sid), map[string]any{"name": "s", "health_path": "/health"})
	g.Route("all", sid, nil)
	poll.Until(t, "both healthy", func() bool {
		return healthState(g, testgw.Port(a)) == "healthy" && healthState(g, testgw.Port(b)) == "healthy"
	})

	sickA.Store(true)
	poll.Until(t, "a unhealthy", func() bool { return healthState(g, testgw.Port(a)) == "unhealthy" })
	var hs []map[string]any
	g.JSON("GET", "/api/v1/health", nil, &hs)
	for _, h := range hs {
		if h["check"] != "http" || h["address"] == nil || h["last_checked_at"] == nil {
			t.Fatalf("health entry: %v", h)
		}
	}
	// An unrelated mutation must not reset the health state.
	g.Service("unrelated", "127.0.0.1:9")
	got := countByName(t, g, 20, nil)
	if got["b"] != 20 {
		t.Fatalf("unhealthy target got traffic right after a reload: %v", got)
	}
	// All unhealthy: traffic still flows rather than failing.
	sickB.Store(true)
	poll.Until(t, "b unhealthy", func() bool { return healthState(g, testgw.Port(b)) == "unhealthy" })
	got = countByName(t, g, 10, nil)
	if got["a"]+got["b"] != 10 {
		t.Fatalf("with every target unhealthy: %v", got)
	}
	sickA.Store(false)
	poll.Until(t, "a healthy again", func() bool { return healthState(g, testgw.Port(a)) == "healthy" })
	got = countByName(t, g, 10, nil)
	if got["a"] != 10 {
		t.Fatalf("recovered target: %v", got)
	}
}

func TestTCPHealthCheck(t *testing.T) {
	g := testgw.Start(t, &testgw.Options{HealthInterval: 50 * time.Millisecond})
	a, b := testgw.Echo(t, "a"), testgw.Echo(t, "b")
	sid := g.Service("s", testgw.Addr(a), testgw.Addr(b))
	g.Route("all", sid, nil)
	poll.Until(t, "healthy", func() bool { return healthState(g, testgw.Port(b)) == "healthy" })
	b.Close()
	poll.Until(t, "b unhealthy", func() bool { return healthState(g, testgw.Port(b)) == "unhealthy" })
	got := countByName(t, g, 10, nil)
	if got["a"] != 10 {
		t.Fatalf("closed target got traffic: %v", got)
	}
}
