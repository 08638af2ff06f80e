package cluster

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// clusterView is GET /api/v1/cluster.
type clusterView struct {
	Mode          string `json:"mode"`
	NodeID        string `json:"node_id"`
	ConfigVersion int64  `json:"config_version"`
	Nodes         []struct {
		ID            string `json:"id"`
		AdminAddress  string `json:"admin_address"`
		HTTPAddress   string `json:"http_address"`
		ConfigVersion int64  `json:"config_version"`
		Stale         bool   `json:"stale"`
		Self          bool   `json:"self"`
	} `json:"nodes"`
}

func (n *node) cluster() clusterView {
	n.t.Helper()
	st, b := n.try("GET", "/api/v1/cluster", nil)
	var v clusterView
	if st != 200 || json.Unmarshal(b, &v) != nil {
		n.t.Fatalf("GET /api/v1/cluster on %s: %d %s", n.name, st, b)
	}
	return v
}

// waitVersion waits until every node serves the stored version v.
func waitVersion(t *testing.T, nodes []*node, v int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, n := range nodes {
		for {
			got := n.configVersion()
			if got == v {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s serves version %d, want %d", n.name, got, v)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestCluster(t *testing.T) {
	top := t // upstreams live as long as the nodes
	pg, nodes := threeNodes(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	t.Run("a mutation on node 1 serves on nodes 2 and 3", func(t *testing.T) {
		sid := service(n1, "web", upstream(top, "web"))
		n1.must("POST", "/api/v1/routes", map[string]any{"name": "web", "service_id": sid, "paths": []string{"/web"}})
		for _, n := range nodes {
			n.waitServes("/web/x", "web /web/x", 2*time.Second)
		}
		v := n1.configVersion()
		if v < 3 {
			t.Fatalf("stored version after three changes: %d", v)
		}
		waitVersion(t, nodes, v, 2*time.Second)
	})

	t.Run("the nodes list each other", func(t *testing.T) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			v := n2.cluster()
			ok := v.Mode == "postgres" && len(v.Nodes) == 3
			for _, x := range v.Nodes {
				ok = ok && !x.Stale && x.ConfigVersion == v.ConfigVersion && x.Self == (x.AdminAddress == n2.admin)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster view: %+v", v)
			}
			time.Sleep(200 * time.Millisecond)
		}
		addrs := map[string]bool{}
		for _, x := range n1.cluster().Nodes {
			addrs[x.AdminAddress+" "+x.HTTPAddress] = true
		}
		for _, n := range nodes {
			if !addrs[n.admin+" "+n.http] {
				t.Fatalf("%s (%s, %s) missing from %v", n.name, n.admin, n.http, addrs)
			}
		}
	})

	t.Run("a change whose notification is lost arrives by the periodic check", func(t *testing.T) {
		// A change committed with its version bump but without NOTIFY (as
		// when a node's listener is gone at that moment): only the
		// periodic version check can bring it to the nodes.
		sid := service(n1, "periodic", upstream(top, "before"))
		n1.must("POST", "/api/v1/routes", map[string]any{"name": "periodic", "service_id": sid, "paths": []string{"/periodic"}})
		for _, n := range nodes {
			n.waitServes("/periodic/x", "before /periodic/x", 2*time.Second)
		}
		db, err := sql.Open("pgx", pg.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		host, port := testgw.HostPort(top, upstream(top, "after-check"))
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		var v int64
		// updated_at is set as every writer of services and targets must
		// (the nodes see changed rows by their stamps, storage/rowcache.go).
		if _, err := tx.Exec("UPDATE targets SET host = $1, port = $2, updated_at = now() WHERE service_id = $3", host, port, sid); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow("UPDATE gateway_cluster SET config_version = config_version + 1 WHERE id = 1 RETURNING config_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for _, n := range nodes {
			n.waitServes("/periodic/x", "after-check /periodic/x", CheckPeriodForTest+3*time.Second)
		}
		waitVersion(t, nodes, v, 2*time.Second)
		t.Logf("the nodes converged %v after the silent commit (check period %v)", time.Since(start).Round(time.Millisecond), CheckPeriodForTest)
	})

	t.Run("a refused change changes nothing anywhere", func(t *testing.T) {
		v := n1.configVersion()
		st, body := n3.try("POST", "/api/v1/routes", map[string]any{"name": "bad", "service_id": 999999, "paths": []string{"/bad"}})
		if st != 400 {
			t.Fatalf("route to a missing service: %d %s", st, body)
		}
		time.Sleep(100 * time.Millisecond)
		for _, n := range nodes {
			if got := n.configVersion(); got != v {
				t.Fatalf("%s moved to version %d after a refused change (was %d)", n.name, got, v)
			}
		}
	})

	t.Run("PostgreSQL down: traffic served, mutations refused; back: converge", func(t *testing.T) {
		// Proxied traffic on every node through the whole outage.
		var stop atomic.Bool
		var wg sync.WaitGroup
		var total, failed atomic.Int64
		var firstFailure atomic.Value
		for _, n := range nodes {
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						st, body := n.get("/web/load")
						total.Add(1)
						if st != 200 {
							failed.Add(1)
							firstFailure.CompareAndSwap(nil, fmt.Sprintf("%s: %d %s", n.name, st, body))
						}
					}
				}()
			}
		}
		time.Sleep(300 * time.Millisecond)
		before := n1.configVersion()
		pg.Stop()
		for i, n := range nodes {
			st, body := n.try("POST", "/api/v1/services", map[string]any{"name": fmt.Sprintf("during-outage-%d", i)})
			var e map[string]any
			if st != 503 || json.Unmarshal(body, &e) != nil || e["error"] == nil {
				t.Errorf("mutation on %s with the database down: %d %s", n.name, st, body)
			}
		}
		time.Sleep(CheckPeriodForTest + time.Second) // the periodic check fails meanwhile
		for _, n := range nodes {
			if got := n.liveVersion(); got != before {
				t.Errorf("%s moved from version %d to %d during the outage", n.name, before, got)
			}
		}
		pg.Restart()
		time.Sleep(300 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		if failed.Load() != 0 || total.Load() < 30 {
			t.Fatalf("%d of %d proxied requests failed during the outage; first: %v", failed.Load(), total.Load(), firstFailure.Load())
		}
		// Nothing was stored by the refused mutations.
		var list []map[string]any
		deadline := time.Now().Add(15 * time.Second)
		for {
			st, body := n2.try("GET", "/api/v1/services", nil)
			if st == 200 && json.Unmarshal(body, &list) == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 2 after PostgreSQL returned: %d %s", st, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, svc := range list {
			if name, _ := svc["name"].(string); strings.HasPrefix(name, "during-outage") {
				t.Fatalf("a mutation refused during the outage was stored: %v", list)
			}
		}
		// A mutation on node 2 reaches node 1 (re-listened after the
		// restart: well before the periodic check would).
		sid := service(n2, "after", upstream(top, "after"))
		n2.must("POST", "/api/v1/routes", map[string]any{"name": "after", "service_id": sid, "paths": []string{"/after"}})
		n1.waitServes("/after/1", "after /after/1", 2*time.Second)
		n3.waitServes("/after/1", "after /after/1", 2*time.Second)
		waitVersion(t, nodes, n2.configVersion(), 2*time.Second)
	})

	t.Run("a killed node restarts with the current configuration", func(t *testing.T) {
		n3.kill()
		sid := service(n1, "late", upstream(top, "late"))
		n1.must("POST", "/api/v1/routes", map[string]any{"name": "late", "service_id": sid, "paths": []string{"/late"}})
		// Its row stays (a crash is not a clean leave).
		found := false
		for _, x := range n1.cluster().Nodes {
			found = found || x.AdminAddress == n3.admin
		}
		if !found {
			t.Fatal("the killed node left the list")
		}
		n3.start()
		n3.waitServes("/late/1", "late /late/1", 2*time.Second)
		waitVersion(t, nodes, n1.configVersion(), 2*time.Second)
	})

	t.Run("a node that missed notifications converges within the check period", func(t *testing.T) {
		// Node 3 stopped (SIGSTOP: it hears nothing) while node 1 changes
		// the configuration; once resumed, its listener's backlog or the
		// periodic check bring it up to date.
		if err := n3.proc.Signal(sigStop); err != nil {
			t.Fatal(err)
		}
		sid := service(n1, "missed", upstream(top, "missed"))
		n1.must("POST", "/api/v1/routes", map[string]any{"name": "missed", "service_id": sid, "paths": []string{"/missed"}})
		if err := n3.proc.Signal(sigCont); err != nil {
			t.Fatal(err)
		}
		n3.waitServes("/missed/1", "missed /missed/1", CheckPeriodForTest+2*time.Second)
	})

	t.Run("a change on a node that has not yet loaded another node's change keeps both", func(t *testing.T) {
		// Node 1 is stopped while node 2 changes the "web" route; node 1's
		// own change is already waiting when it resumes.
		if err := n1.proc.Signal(sigStop); err != nil {
			t.Fatal(err)
		}
		var web map[string]any
		for _, r := range listRoutes(n2) {
			if r["name"] == "web" {
				web = r
			}
		}
		web["paths"] = []string{"/web2"}
		for _, k := range []string{"id", "created_at", "updated_at"} {
			delete(web, k)
		}
		n2.must("PUT", fmt.Sprintf("/api/v1/routes/%d", int64(listRouteID(n2, "web"))), web)
		done := make(chan struct{})
		go func() {
			defer close(done)
			n1.must("POST", "/api/v1/services", map[string]any{"name": "concurrent"})
		}()
		time.Sleep(100 * time.Millisecond)
		if err := n1.proc.Signal(sigCont); err != nil {
			t.Fatal(err)
		}
		<-done
		for _, n := range nodes {
			n.waitServes("/web2/x", "web /web2/x", CheckPeriodForTest+2*time.Second)
		}
		waitVersion(t, nodes, n1.configVersion(), 2*time.Second) // node 1's change came last
	})

	t.Run("sessions and failed-login limits are shared", func(t *testing.T) {
		// The first user turns authentication on for every node.
		n1.must("POST", "/api/v1/users", map[string]any{"email": "ops@example.com", "name": "Ops", "role": "admin", "password": "correct horse battery"})
		if st, _ := n3.try("GET", "/api/v1/services", nil); st != 401 {
			t.Fatalf("node 3 without credentials once a user exists: %d", st)
		}
		st, cookie := login(n1, "correct horse battery")
		if st != 200 || cookie == "" {
			t.Fatalf("login on node 1: %d %q", st, cookie)
		}
		for _, n := range nodes {
			n.proc.Cookie = cookie
			if me := n.must("GET", "/api/v1/auth/me", nil); me["method"] != "session" || me["role"] != "admin" {
				t.Fatalf("node 1's session on %s: %v", n.name, me)
			}
		}
		// 10 failures from this address spread over the three nodes.
		for i := 0; i < 10; i++ {
			if st, _ := login(nodes[i%3], "wrong password"); st != 401 {
				t.Fatalf("failure %d on %s: %d", i+1, nodes[i%3].name, st)
			}
		}
		for _, n := range nodes {
			if st, _ := login(n, "correct horse battery"); st != 429 {
				t.Fatalf("login on %s after 10 failures over the cluster: %d, want 429", n.name, st)
			}
		}
		// The session is still good everywhere.
		n2.must("GET", "/api/v1/auth/me", nil)
	})
}

// login posts a password sign-in to n: the status and the session cookie.
func login(n *node, password string) (int, string) {
	body, _ := json.Marshal(map[string]any{"email": "ops@example.com", "password": password})
	resp, err := client.Post("http://"+n.admin+"/api/v1/auth/login", "application/json", bytes.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "gateway_session" && c.Value != "" {
			return resp.StatusCode, c.Name + "=" + c.Value
		}
	}
	return resp.StatusCode, ""
}

func listRoutes(n *node) []map[string]any {
	n.t.Helper()
	st, b := n.try("GET", "/api/v1/routes", nil)
	var out []map[string]any
	if st != 200 || json.Unmarshal(b, &out) != nil {
		n.t.Fatalf("routes on %s: %d %s", n.name, st, b)
	}
	return out
}

func listRouteID(n *node, name string) float64 {
	for _, r := range listRoutes(n) {
		if r["name"] == name {
			return r["id"].(float64)
		}
	}
	n.t.Fatalf("no route %s", name)
	return 0
}
