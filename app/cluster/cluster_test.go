package cluster_test

import (
	"testing"

	"github.com/caddy-gateway/gateway/app/cluster"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// On SQLite the cluster is this one node, and the stored version moves
// with every committed change (and not with a refused one).
func TestSingleNodeOnSQLite(t *testing.T) {
	g := testgw.Start(t, nil)
	var v cluster.Cluster
	g.JSON("GET", "/api/v1/cluster", nil, &v)
	if v.Mode != "sqlite" || len(v.Nodes) != 1 || !v.Nodes[0].Self || v.Nodes[0].Stale || v.Nodes[0].ID != v.NodeID ||
		"http://"+v.Nodes[0].AdminAddress != g.AdminURL || v.Nodes[0].HTTPAddress != g.ProxyAddr {
		t.Fatalf("single node: %+v (admin %s, proxy %s)", v, g.AdminURL, g.ProxyAddr)
	}
	before := v.ConfigVersion
	g.Service("s", "127.0.0.1:9")
	if st, _ := g.Do("POST", "/api/v1/routes", map[string]any{"name": "r", "service_id": 999999, "paths": []string{"/"}}); st != 400 {
		t.Fatalf("route to a missing service: %d", st)
	}
	g.JSON("GET", "/api/v1/cluster", nil, &v)
	cfg := g.Must("GET", "/api/v1/config", nil)
	if v.ConfigVersion != before+2 || v.Nodes[0].ConfigVersion != v.ConfigVersion || int64(cfg["version"].(float64)) != v.ConfigVersion {
		t.Fatalf("versions after a service and a target (and one refused change): was %d, now %+v, config %v", before, v, cfg["version"])
	}
}
