package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/adminext/controlplane"
	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/proxybench"
	"github.com/caddy-gateway/gateway/storage"
)

// BenchmarkMutationToLive measures the admin round trip of one route update
// (persist, compile, caddy.Load, answer) with 1, 10,000 and 50,000 routes
// in the store, spread over 100 services, and reports the median as
// p50-ms. Goal: a change's cost independent of the number of routes, under
// 30 ms at 10,000 and 100 ms at 50,000 (bench/README.md).
func BenchmarkMutationToLive(b *testing.B) {
	for _, n := range []int{1, 10000, 50000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			g := testgw.Start(b, &testgw.Options{NoOpenAPICheck: true})
			db := controlplane.Current().Store().DB
			var svcs []storage.Service
			for i := 0; i < 100; i++ {
				svcs = append(svcs, storage.Service{Name: fmt.Sprintf("s%d", i), Protocol: "http", ConnectTimeoutMS: 5000,
					ReadTimeoutMS: 60000, WriteTimeoutMS: 60000, Retries: 1, LBAlgorithm: "round_robin"})
			}
			if err := db.Create(&svcs).Error; err != nil {
				b.Fatal(err)
			}
			var tg []storage.Target
			for i, s := range svcs {
				tg = append(tg, storage.Target{ServiceID: s.ID, Host: "127.0.0.1", Port: 10000 + i, Weight: 100, Enabled: true})
			}
			if err := db.Create(&tg).Error; err != nil {
				b.Fatal(err)
			}
			sids := make([]int64, len(svcs))
			for i, s := range svcs {
				sids[i] = s.ID
			}
			routes := bulkRoutes(b, sids, n)
			id := routes[0].ID
			body := map[string]any{"name": "bulk0", "service_id": svcs[0].ID, "hosts": []string{"h0.example.com"}, "paths": []string{"/"}}
			g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", id), body) // load the bulk insert once
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				body["priority"] = i
				start := time.Now()
				g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", id), body)
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
			if st, _, _ := g.Get("h0.example.com", "/"); st == 404 {
				b.Fatal("route not live")
			}
		})
	}
}

// BenchmarkServiceChangeToLive measures the admin round trip of one route
// update and one target update with 5,000 services of two targets each
// and one route per service (bench/scale.sh's services case), and reports
// the medians as route-p50-ms and target-p50-ms. Goal: under 100 ms
// (bench/README.md, "Session 5: 5,000 services").
func BenchmarkServiceChangeToLive(b *testing.B) {
	const n = 5000
	g := testgw.Start(b, &testgw.Options{NoOpenAPICheck: true})
	db := controlplane.Current().Store().DB
	svcs := make([]storage.Service, n)
	for i := range svcs {
		svcs[i] = storage.Service{Name: fmt.Sprintf("s%d", i), Protocol: "http", ConnectTimeoutMS: 5000,
			ReadTimeoutMS: 60000, WriteTimeoutMS: 60000, Retries: 1, LBAlgorithm: "round_robin"}
	}
	if err := db.CreateInBatches(&svcs, 500).Error; err != nil {
		b.Fatal(err)
	}
	tg := make([]storage.Target, 0, 2*n)
	for i, s := range svcs {
		for j := 0; j < 2; j++ {
			tg = append(tg, storage.Target{ServiceID: s.ID, Host: "127.0.0.1", Port: 10000 + 2*(i%100) + j, Weight: 100, Enabled: true})
		}
	}
	if err := db.CreateInBatches(&tg, 500).Error; err != nil {
		b.Fatal(err)
	}
	sids := make([]int64, n)
	for i, s := range svcs {
		sids[i] = s.ID
	}
	routes := bulkRoutes(b, sids, n)
	rid, tid := routes[0].ID, tg[0].ID
	body := map[string]any{"name": "bulk0", "service_id": svcs[0].ID, "hosts": []string{"h0.example.com"}, "paths": []string{"/"}}
	g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", rid), body) // load the bulk insert once
	target := map[string]any{"host": "127.0.0.1", "port": 10000}
	routeTimes := make([]time.Duration, 0, b.N)
	targetTimes := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body["priority"] = i
		start := time.Now()
		g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", rid), body)
		routeTimes = append(routeTimes, time.Since(start))
		target["weight"] = 100 + i
		start = time.Now()
		g.Must("PUT", fmt.Sprintf("/api/v1/targets/%d", tid), target)
		targetTimes = append(targetTimes, time.Since(start))
	}
	b.StopTimer()
	for name, times := range map[string][]time.Duration{"route": routeTimes, "target": targetTimes} {
		slices.Sort(times)
		b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, name+"-p50-ms")
	}
	if st, _, _ := g.Get("h0.example.com", "/"); st == 404 {
		b.Fatal("route not live")
	}
}

// BenchmarkHeapAcrossChanges measures what each configuration change leaves
// on the heap: 100 routes, b.N route updates, heap in use after a forced GC
// before and after. Goal: under 20 MB of growth over 2,000 changes (run
// with -benchtime 2000x); reported as heap-growth-MB.
func BenchmarkHeapAcrossChanges(b *testing.B) {
	g := testgw.Start(b, &testgw.Options{NoOpenAPICheck: true})
	sid := g.Service("s", "127.0.0.1:9")
	var rid int64
	for i := 0; i < 100; i++ {
		rid = g.Route(fmt.Sprintf("r%d", i), sid, map[string]any{"paths": []string{fmt.Sprintf("/r%d", i)}})
	}
	body := map[string]any{"name": "r", "service_id": sid, "paths": []string{"/changed"}}
	g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", rid), body)
	before := heapAfterGC()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body["priority"] = i
		g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", rid), body)
	}
	b.StopTimer()
	after := heapAfterGC()
	b.ReportMetric((float64(after)-float64(before))/(1<<20), "heap-growth-MB")
}

// BenchmarkProxyPath serves requests in-process through the gateway's whole
// proxy path (the listener's handler: router, plugin chain, the service's
// reverse proxy to a real upstream on 127.0.0.1, request record, metrics),
// without a client connection, for the bare route and the four-plugin chain
// of bench/proxy.sh (request-id, key-auth, rate-limit, response-transform).
// allocs/op is the figure to track (bench/README.md): the chain's extra
// allocations are the difference between the two; ns/op includes the
// upstream round trip over loopback.
func BenchmarkProxyPath(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello from the upstream, a small body of about sixty bytes."))
	}))
	defer up.Close()
	g := testgw.Start(b, &testgw.Options{NoOpenAPICheck: true})
	svc := g.Service("bench", strings.TrimPrefix(up.URL, "http://"))
	g.Route("plain", svc, map[string]any{"paths": []string{"/plain"}})
	chain := g.Route("chain", svc, map[string]any{"paths": []string{"/chain"}})
	for _, p := range []map[string]any{
		{"type": "request-id"},
		{"type": "key-auth"},
		{"type": "rate-limit", "config": map[string]any{"limit": 1000000000, "window_s": 60}},
		{"type": "response-transform", "config": map[string]any{"set_headers": map[string]string{"X-Served-By": "gateway"}}},
	} {
		p["scope"], p["route_id"] = "route", chain
		g.Must("POST", "/api/v1/plugins", p)
	}
	c := g.Must("POST", "/api/v1/consumers", map[string]any{"username": "bench"})
	g.Must("POST", fmt.Sprintf("/api/v1/consumers/%d/credentials", testgw.ID(c)), map[string]any{"type": "key-auth", "key": "bench-key"})
	h := controlplane.Current().ProxyHandler()

	for _, path := range []string{"/plain", "/chain"} {
		b.Run(strings.TrimPrefix(path, "/"), func(b *testing.B) {
			w := &proxybench.Writer{}
			serve := func() {
				w.Reset()
				h.ServeHTTP(w, proxybench.Request(g.ProxyAddr, path))
			}
			serve()
			if w.Status != http.StatusOK {
				b.Fatalf("%s answered %d", path, w.Status)
			}
			proxybench.Run(b, serve)
			if w.Status != http.StatusOK {
				b.Fatalf("%s answered %d", path, w.Status)
			}
		})
	}
}
