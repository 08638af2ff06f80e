package backup_test

import (
	"fmt"
	"testing"

	"github.com/caddy-gateway/gateway/app/controlplane"
)

// TestImportBatches: routes are inserted in batches of 1,000; a document
// with more keeps every route and maps plugin references to the new ids
// across batches, and a batch the database refuses is retried row by row
// so that the error names the item and nothing is stored.
func TestImportBatches(t *testing.T) {
	g := start(t, nil)
	const n = 2345
	routes := make([]any, n)
	for i := range routes {
		routes[i] = map[string]any{"id": 10 + i, "name": fmt.Sprintf("r%d", i), "service_id": 7, "paths": []any{fmt.Sprintf("/r%d", i)}}
	}
	doc := map[string]any{
		"format": "gateway-export", "version": 1,
		"services": []any{map[string]any{"id": 7, "name": "s", "targets": []any{map[string]any{"host": "127.0.0.1", "port": 9}}}},
		"routes":   routes,
		"plugins": []any{
			map[string]any{"id": 1, "type": "request-id", "scope": "route", "route_id": 10 + n - 1, "config": map[string]any{}},
			map[string]any{"id": 2, "type": "request-id", "scope": "route", "route_id": 10 + 1500, "config": map[string]any{}},
		},
	}
	rep := g.Must("POST", "/api/v1/import", doc)
	if got := rep["restored"].(map[string]any)["routes"]; got != float64(n) {
		t.Fatalf("restored %v routes, want %d", got, n)
	}
	var list []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	g.JSON("GET", "/api/v1/routes", nil, &list)
	byName := map[string]int64{}
	for _, r := range list {
		byName[r.Name] = r.ID
	}
	if len(byName) != n {
		t.Fatalf("%d routes stored, want %d", len(byName), n)
	}
	for pid, name := range map[int]string{1: fmt.Sprintf("r%d", n-1), 2: "r1500"} {
		var pl struct {
			RouteID int64 `json:"route_id"`
		}
		g.JSON("GET", p("/api/v1/plugins/%d", pid), nil, &pl)
		if pl.RouteID != byName[name] {
			t.Fatalf("plugin %d has route_id %d, want %d (route %s)", pid, pl.RouteID, byName[name], name)
		}
	}

	// A unique index the routes do not have in production makes the
	// database refuse the second batch.
	db := controlplane.Current().Store().DB
	if err := db.Exec("CREATE UNIQUE INDEX test_route_name ON routes(name)").Error; err != nil {
		t.Fatal(err)
	}
	defer db.Exec("DROP INDEX test_route_name")
	routes[1200].(map[string]any)["name"] = "r3"
	wantError(t, g, 400, "POST", "/api/v1/import", doc, "routes[1200]", "conflicts")
	list = nil
	g.JSON("GET", "/api/v1/routes", nil, &list)
	if len(list) != n || list[0].ID != byName["r0"] {
		t.Fatalf("a refused import changed the routes: %d stored", len(list))
	}
}
