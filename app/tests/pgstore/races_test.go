package pgstore

import (
	"fmt"
	"sync"
	"testing"
)

// TestExportDuringChangesOnPostgres: exports taken while applications are
// created (a service, its target, a route and a plugin in one change) are
// each one state of the store: every route's and plugin's service_id and
// route_id names an item of the same document, so each of them imports.
// At PostgreSQL's default isolation (read committed) each query of the
// export saw what had committed when it started, and an application
// committed between the services query and the routes query showed up as
// a route of a service the document did not have.
func TestExportDuringChangesOnPostgres(t *testing.T) {
	g := pgGateway(t)
	const apps = 60
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < apps; i++ {
			g.Must("POST", "/api/v1/applications", map[string]any{"name": fmt.Sprintf("app%d", i),
				"domain": fmt.Sprintf("app%d.example.com", i), "upstream_url": "http://127.0.0.1:9", "allowed_cidrs": []string{"127.0.0.1"}})
		}
	}()
	var mu sync.Mutex
	exports, broken := 0, []string{}
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				var doc struct {
					Services []struct{ ID int64 }
					Routes   []struct {
						ID        int64
						ServiceID int64 `json:"service_id"`
					}
					Plugins []struct {
						ID        int64
						ServiceID *int64 `json:"service_id"`
						RouteID   *int64 `json:"route_id"`
					}
				}
				if st := g.JSON("GET", "/api/v1/export", nil, &doc); st != 200 {
					t.Errorf("export: %d", st)
					return
				}
				services, routes := map[int64]bool{}, map[int64]bool{}
				for _, s := range doc.Services {
					services[s.ID] = true
				}
				var missing []string
				for _, r := range doc.Routes {
					routes[r.ID] = true
					if !services[r.ServiceID] {
						missing = append(missing, fmt.Sprintf("route %d's service %d", r.ID, r.ServiceID))
					}
				}
				for _, p := range doc.Plugins {
					if p.ServiceID != nil && !services[*p.ServiceID] {
						missing = append(missing, fmt.Sprintf("plugin %d's service %d", p.ID, *p.ServiceID))
					}
					if p.RouteID != nil && !routes[*p.RouteID] {
						missing = append(missing, fmt.Sprintf("plugin %d's route %d", p.ID, *p.RouteID))
					}
				}
				mu.Lock()
				exports++
				if len(missing) > 0 {
					broken = append(broken, fmt.Sprint(missing))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(broken) > 0 {
		t.Fatalf("%d of %d exports taken during changes are not one state of the store; the first misses %s", len(broken), exports, broken[0])
	}
	if got := g.List("/api/v1/routes"); len(got) != apps {
		t.Fatalf("%d routes, want %d", len(got), apps)
	}
}
