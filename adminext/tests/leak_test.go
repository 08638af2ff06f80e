package tests

import (
	"fmt"
	"runtime"
	"testing"
	"weak"

	"github.com/caddy-gateway/gateway/adminext/controlplane"
	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
	"github.com/caddy-gateway/gateway/modules/router"
)

// TestReloadReleasesOldConfigs: every mutation provisions a new router (and
// a new Caddy context); once a newer config is live, the old ones must be
// collectable. A reference kept anywhere (the previous app, a process-level
// registry, a closure) would grow the heap with every change, forever.
func TestReloadReleasesOldConfigs(t *testing.T) {
	g := testgw.Start(t, nil)
	up := echo(t, "up")
	sid := g.Service("s", addr(up))
	var rid int64
	for i := 0; i < 100; i++ {
		rid = g.Route(fmt.Sprintf("r%d", i), sid, map[string]any{"paths": []string{fmt.Sprintf("/r%d", i)}})
	}
	// A plugin, a consumer and a credential, so their instances are part
	// of every config too.
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": rid})
	c := g.Must("POST", "/api/v1/consumers", map[string]any{"username": "alice"})
	g.Must("POST", fmt.Sprintf("/api/v1/consumers/%d/credentials", testgw.ID(c)), map[string]any{"type": "key-auth", "key": "k-alice"})

	const changes = 40
	var old []weak.Pointer[router.Router]
	for i := 0; i < changes; i++ {
		old = append(old, weak.Make(controlplane.Current().Router()))
		g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", rid), map[string]any{"name": fmt.Sprintf("r-%d", i), "service_id": sid, "paths": []string{"/changed"}})
		if st, _, _ := g.Get("localhost", "/r1/x"); st != 200 {
			t.Fatalf("change %d: proxied GET: %d", i, st)
		}
	}
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	alive := 0
	for _, w := range old {
		if w.Value() != nil {
			alive++
		}
	}
	// The live router and, at most, the one before it (a reload in
	// progress may still reach it) may be alive.
	if alive > 1 {
		t.Fatalf("%d of %d replaced routers are still reachable after GC: old configurations leak", alive, changes)
	}

	// Nothing else may accumulate either (Caddy contexts, loggers,
	// registries): the heap in use after GC stays flat over many changes.
	// About 155 KB per change leaked before the fix; 300 changes leaking
	// even a tenth of that would pass 4 MB.
	before := heapAfterGC()
	for i := 0; i < 300; i++ {
		g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", rid), map[string]any{"name": fmt.Sprintf("h-%d", i), "service_id": sid, "paths": []string{"/changed"}})
	}
	after := heapAfterGC()
	t.Logf("heap after GC: %d KB before, %d KB after 300 changes", before/1024, after/1024)
	if after > before+4<<20 {
		t.Fatalf("heap grew by %d KB over 300 changes", (after-before)/1024)
	}
}
