package tests

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
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
			s := startBulk(b, 100, 1, n)
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.route["priority"] = i
				times = append(times, s.put("routes", s.routeID, s.route))
			}
			b.StopTimer()
			reportP50(b, "p50-ms", times)
			s.wantLive(b)
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
	s := startBulk(b, n, 2, n)
	target := map[string]any{"host": "127.0.0.1", "port": 10000}
	routeTimes := make([]time.Duration, 0, b.N)
	targetTimes := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.route["priority"] = i
		routeTimes = append(routeTimes, s.put("routes", s.routeID, s.route))
		target["weight"] = 100 + i
		targetTimes = append(targetTimes, s.put("targets", s.targetID, target))
	}
	b.StopTimer()
	reportP50(b, "route-p50-ms", routeTimes)
	reportP50(b, "target-p50-ms", targetTimes)
	s.wantLive(b)
}

// bulkStore is a gateway whose store was filled directly (not through the
// API) for the mutation benchmarks, and the first route's update body.
type bulkStore struct {
	g                 *testgw.Gateway
	route             map[string]any
	routeID, targetID int64
}

// startBulk starts a gateway with services services of perService targets
// each (on 127.0.0.1 ports 10000 and up, never dialled) and routes routes
// spread over them (bulkRoutes), inserted in batches, and loads them once
// with an update of the first route.
func startBulk(b *testing.B, services, perService, routes int) *bulkStore {
	g := testgw.Start(b, &testgw.Options{NoOpenAPICheck: true})
	db := controlplane.Current().Store().DB
	svcs := make([]storage.Service, services)
	for i := range svcs {
		svcs[i] = storage.Service{Name: fmt.Sprintf("s%d", i), Protocol: "http", ConnectTimeoutMS: 5000,
			ReadTimeoutMS: 60000, WriteTimeoutMS: 60000, Retries: 1, LBAlgorithm: "round_robin"}
	}
	if err := db.CreateInBatches(&svcs, 500).Error; err != nil {
		b.Fatal(err)
	}
	tg := make([]storage.Target, 0, perService*services)
	sids := make([]int64, services)
	for i, s := range svcs {
		sids[i] = s.ID
		for j := 0; j < perService; j++ {
			tg = append(tg, storage.Target{ServiceID: s.ID, Host: "127.0.0.1", Port: 10000 + perService*(i%100) + j, Weight: 100, Enabled: true})
		}
	}
	if err := db.CreateInBatches(&tg, 500).Error; err != nil {
		b.Fatal(err)
	}
	s := &bulkStore{g: g, routeID: bulkRoutes(b, sids, routes)[0].ID, targetID: tg[0].ID,
		route: map[string]any{"name": "bulk0", "service_id": sids[0], "hosts": []string{"h0.example.com"}, "paths": []string{"/"}}}
	s.put("routes", s.routeID, s.route) // load the bulk insert once
	return s
}

// put updates one resource and answers how long the round trip took.
func (s *bulkStore) put(resource string, id int64, body map[string]any) time.Duration {
	start := time.Now()
	s.g.Must("PUT", fmt.Sprintf("/api/v1/%s/%d", resource, id), body)
	return time.Since(start)
}

// wantLive fails unless the first route (h0.example.com) is served.
func (s *bulkStore) wantLive(b *testing.B) {
	if st, _, _ := s.g.Get("h0.example.com", "/"); st == 404 {
		b.Fatal("route not live")
	}
}

// reportP50 reports the median of times in milliseconds.
func reportP50(b *testing.B, unit string, times []time.Duration) {
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, unit)
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
// upstream round trip over loopback. "headers" is a route whose
// request-transform and response-transform set the same headers the
// chain sends each way, with fixed values: what the headers cost without
// the plugins that make them.
func BenchmarkProxyPath(b *testing.B) {
	up := testgw.Upstream(b, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello from the upstream, a small body of about sixty bytes."))
	})
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
	headers := g.Route("headers", svc, map[string]any{"paths": []string{"/headers"}})
	const id = "0f8e9c1a-3b2d-4c5e-8f7a-123456789abc"
	for typ, set := range map[string]map[string]string{
		"request-transform":  {"X-Request-ID": id, "X-Consumer-ID": "1", "X-Consumer-Username": "bench", "X-Consumer-Groups": ""},
		"response-transform": {"X-Request-ID": id, "RateLimit-Limit": "1000000000", "RateLimit-Remaining": "999999999", "RateLimit-Reset": "60", "X-Served-By": "gateway"},
	} {
		g.Must("POST", "/api/v1/plugins", map[string]any{"type": typ, "scope": "route", "route_id": headers, "config": map[string]any{"set_headers": set}})
	}
	c := g.Must("POST", "/api/v1/consumers", map[string]any{"username": "bench"})
	g.Must("POST", fmt.Sprintf("/api/v1/consumers/%d/credentials", testgw.ID(c)), map[string]any{"type": "key-auth", "key": "bench-key"})
	h := controlplane.Current().ProxyHandler()

	for _, path := range []string{"/plain", "/chain", "/headers"} {
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

// BenchmarkWAF measures the waf plugin (paranoia level 1, defaults) on the
// in-process proxy path against the bare route, a GET of each (goal: at
// least 0.6x the bare route's throughput), and the admin round trip of
// one route update with a waf plugin present, reported as p50-ms (goal:
// under 50 ms: the rule set is not compiled again).
func BenchmarkWAF(b *testing.B) {
	up := testgw.Upstream(b, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello from the upstream, a small body of about sixty bytes."))
	})
	g := testgw.Start(b, &testgw.Options{NoOpenAPICheck: true})
	svc := g.Service("bench", strings.TrimPrefix(up.URL, "http://"))
	plain := g.Route("plain", svc, map[string]any{"paths": []string{"/plain"}})
	wafRoute := g.Route("waf", svc, map[string]any{"paths": []string{"/waf"}})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "waf", "scope": "route", "route_id": wafRoute})
	h := controlplane.Current().ProxyHandler()
	for _, path := range []string{"/plain", "/waf"} {
		b.Run("get-"+strings.TrimPrefix(path, "/"), func(b *testing.B) {
			w := &proxybench.Writer{}
			serve := func() {
				w.Reset()
				// a named host: a numeric Host is itself a CRS anomaly
				r := proxybench.Request("bench.example", path)
				r.Header.Set("Accept", "application/json")
				h.ServeHTTP(w, r)
			}
			serve()
			if w.Status != http.StatusOK {
				b.Fatalf("%s answered %d", path, w.Status)
			}
			proxybench.Run(b, serve)
		})
	}
	b.Run("change", func(b *testing.B) {
		route := map[string]any{"name": "plain", "service_id": svc, "paths": []string{"/plain"}}
		times := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			route["priority"] = i
			start := time.Now()
			if st, body := g.Do("PUT", fmt.Sprintf("/api/v1/routes/%d", plain), route); st != 200 {
				b.Fatalf("PUT: %d %s", st, body)
			}
			times = append(times, time.Since(start))
		}
		reportP50(b, "p50-ms", times)
	})
}
