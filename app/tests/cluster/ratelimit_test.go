package cluster

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/redistest"
)

// storesView is GET /api/v1/cluster's rate_limit_stores.
type storesView struct {
	Stores map[string]struct {
		Configured bool   `json:"configured"`
		Address    string `json:"address"`
		Up         bool   `json:"up"`
		Fallbacks  int64  `json:"fallbacks"`
	} `json:"rate_limit_stores"`
}

func (n *node) stores() storesView {
	n.t.Helper()
	st, b := n.try("GET", "/api/v1/cluster", nil)
	var v storesView
	if st != 200 || json.Unmarshal(b, &v) != nil {
		n.t.Fatalf("GET /api/v1/cluster on %s: %d %s", n.name, st, b)
	}
	return v
}

// waitStores waits until every node sees both shared stores as up (want)
// or down.
func waitStores(t *testing.T, nodes []*node, policy string, want bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range nodes {
		for n.stores().Stores[policy].Up != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the %s store's up is not %v: %+v", n.name, policy, want, n.stores())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// limited sends count GETs of path spread over the nodes (round robin) and
// returns the statuses and each answer's RateLimit-Remaining.
func limited(nodes []*node, path string, count int) (statuses []int, remaining []string) {
	for i := range count {
		n := nodes[i%len(nodes)]
		resp, err := client.Get("http://" + n.http + path)
		if err != nil {
			statuses, remaining = append(statuses, 0), append(remaining, "")
			continue
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		remaining = append(remaining, resp.Header.Get("RateLimit-Remaining"))
	}
	return statuses, remaining
}

func countStatus(statuses []int, want int) int {
	n := 0
	for _, s := range statuses {
		if s == want {
			n++
		}
	}
	return n
}

// Three gateway processes share rate limits on Redis (the shipped
// Caddyfile's GATEWAY_REDIS_URL) and on their PostgreSQL store: a limit of
// N lets exactly N through with requests spread over the nodes, the
// headers agree across nodes; with Redis stopped under traffic,
// fault_tolerant limits serve every request and the others answer 503;
// restarted, shared counting resumes.
func TestSharedRateLimits(t *testing.T) {
	top := t
	rd := redistest.Start(t)
	_, nodes := threeNodes(t, "GATEWAY_REDIS_URL="+rd.URL())
	n1 := nodes[0]
	waitStores(t, nodes, "redis", true)
	waitStores(t, nodes, "cluster", true)
	if st := n1.stores().Stores["redis"]; !st.Configured || st.Address != rd.URL() {
		t.Fatalf("redis store state: %+v", st)
	}

	sid := service(n1, "rl", upstream(top, "rl"))
	// route adds a route on prefix with a rate limit of cfg and waits until
	// every node serves the version that has it (no request is spent).
	route := func(prefix string, cfg map[string]any) {
		t.Helper()
		rid := testgw.ID(n1.must("POST", "/api/v1/routes", map[string]any{"name": prefix[1:], "service_id": sid, "paths": []string{prefix}}))
		n1.must("POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "route", "route_id": rid, "config": cfg})
		waitVersion(t, nodes, n1.configVersion(), 10*time.Second)
	}

	for _, policy := range []string{"redis", "cluster"} {
		t.Run(policy+": exactly the limit across three nodes", func(t *testing.T) {
			const limit = 10
			route("/exact-"+policy, map[string]any{"limit": limit, "window_s": 3600, "key": "global", "policy": policy})
			statuses, remaining := limited(nodes, "/exact-"+policy+"/x", 3*limit)
			if got := countStatus(statuses, 200); got != limit {
				t.Fatalf("%d requests over three nodes with a limit of %d: %d answered 200 (%v)", 3*limit, limit, got, statuses)
			}
			for i := range limit {
				// The window is an hour old at most: the remaining count is
				// the shared one, request after request, whichever node.
				if statuses[i] != 200 || remaining[i] != strconv.Itoa(limit-1-i) {
					t.Fatalf("request %d (node %d): %d, RateLimit-Remaining %q, want 200 and %d", i, i%3+1, statuses[i], remaining[i], limit-1-i)
				}
			}
			if got := countStatus(statuses, http.StatusTooManyRequests); got != 2*limit {
				t.Fatalf("429s: %d of %v", got, statuses)
			}
		})
	}

	t.Run("redis with sync_interval_ms 100 stays within the bound", func(t *testing.T) {
		const limit = 20
		route("/sync", map[string]any{"limit": limit, "window_s": 3600, "key": "global", "policy": "redis", "sync_interval_ms": 100})
		var ok int
		for range 4 {
			statuses, _ := limited(nodes, "/sync/x", 30)
			ok += countStatus(statuses, 200)
			time.Sleep(150 * time.Millisecond)
		}
		// At most the limit plus what the other two nodes admitted
		// within one interval, never more than three times the limit.
		if ok < limit || ok > 3*limit {
			t.Fatalf("sync 100 ms: %d admitted with a limit of %d over three nodes", ok, limit)
		}
		t.Logf("sync 100 ms: %d admitted with a limit of %d", ok, limit)
	})

	t.Run("Redis stopped under traffic, then restarted", func(t *testing.T) {
		route("/tolerant", map[string]any{"limit": 100000, "key": "ip", "policy": "redis"})
		route("/strict", map[string]any{"limit": 100000, "key": "ip", "policy": "redis", "fault_tolerant": false})
		if statuses, _ := limited(nodes, "/strict/x", 6); countStatus(statuses, 200) != 6 {
			t.Fatalf("before the outage: %v", statuses)
		}
		rd.Stop()
		var tolerant, strict []int
		for range 10 {
			s, _ := limited(nodes, "/tolerant/x", 6)
			tolerant = append(tolerant, s...)
			s, _ = limited(nodes, "/strict/x", 6)
			strict = append(strict, s...)
		}
		if got := countStatus(tolerant, 200); got != len(tolerant) {
			t.Fatalf("fault_tolerant while Redis is stopped: %d of %d answered 200: %v", got, len(tolerant), tolerant)
		}
		if got := countStatus(strict, http.StatusServiceUnavailable); got != len(strict) {
			t.Fatalf("fault_tolerant false while Redis is stopped: %d of %d answered 503: %v", got, len(strict), strict)
		}
		waitStores(t, nodes, "redis", false)
		for _, n := range nodes {
			if n.stores().Stores["redis"].Fallbacks == 0 {
				t.Errorf("%s counted no fallback", n.name)
			}
		}
		st, metrics := n1.proc.Do("GET", "/metrics", nil)
		// (in cluster mode every series has a node label)
		if st != 200 || !containsAll(string(metrics), `gateway_rate_limit_store_up{`, `,policy="redis"} 0`, `gateway_rate_limit_fallbacks_total{`) {
			t.Errorf("/metrics while Redis is down: %d %s", st, metrics)
		}

		rd.Restart()
		waitStores(t, nodes, "redis", true)
		const limit = 5
		route("/after", map[string]any{"limit": limit, "window_s": 3600, "key": "global", "policy": "redis"})
		statuses, _ := limited(nodes, "/after/x", 4*limit)
		if got := countStatus(statuses, 200); got != limit {
			t.Fatalf("after the restart, a limit of %d let %d through: %v", limit, got, statuses)
		}
		if statuses, _ := limited(nodes, "/strict/x", 6); countStatus(statuses, 200) != 6 {
			t.Fatalf("fault_tolerant false after the restart: %v", statuses)
		}
	})

	// The Redis URL is nowhere in the running Caddy config but as the
	// placeholder (a password would be read from the environment).
	resp, err := n1.proc.CaddyAdmin("GET", "/config/apps/gateway/redis")
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	json.NewDecoder(resp.Body).Decode(&raw)
	resp.Body.Close()
	if raw != "{env.GATEWAY_REDIS_URL}" {
		t.Fatalf("Caddy's config holds redis %q", raw)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
