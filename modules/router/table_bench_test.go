package router

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"
)

// benchTable builds n routes of mixed shapes and one request per sampled
// route that hits it:
//
//	i%20 in 0, 10   regex path on an exact host (10%, as bench/scalegen)
//	i%20 in 1..8    exact host, two literal prefixes, half with methods (40%)
//	i%20 in 9..14   wildcard host, literal prefix, a third with a header (25%)
//	i%20 in 15..17  no host, literal prefix (15%)
//	i%20 in 18..19  a shared exact host with many prefixes in one bucket (10%)
//
// Every table also has a catch-all and a regex without a literal prefix in
// the no-host bucket, as real configs do; their cost is the same at every
// size.
func benchTable(b *testing.B, n int) (*Table, []Request, []int64) {
	return benchTableSamples(b, n, 1024)
}

// benchTableSamples is benchTable with the number of requests (a power of
// two) spread over the table.
func benchTableSamples(b *testing.B, n, samples int) (*Table, []Request, []int64) {
	b.Helper()
	routes := make([]Route, 0, n+2)
	for i := range n {
		r := Route{ID: int64(i + 1)}
		switch k := i % 20; {
		case k == 0 || k == 10:
			r.Hosts = []string{fmt.Sprintf("h%d.example.com", i)}
			r.Paths = []string{fmt.Sprintf("~/r%d/[0-9]+/items", i)}
		case k <= 8:
			r.Hosts = []string{fmt.Sprintf("h%d.example.com", i)}
			r.Paths = []string{fmt.Sprintf("/api%d/v1", i), fmt.Sprintf("/api%d/v2", i)}
			if k%2 == 0 {
				r.Methods = []string{"GET", "POST"}
			}
		case k <= 14:
			r.Hosts = []string{fmt.Sprintf("*.t%d.example.net", i)}
			r.Paths = []string{fmt.Sprintf("/svc%d", i)}
			if k%3 == 0 {
				r.Headers = map[string]string{"X-Env": "prod"}
			}
		case k <= 17:
			r.Paths = []string{fmt.Sprintf("/pub%d/", i)}
		default:
			r.Hosts = []string{"shared.example.org"}
			r.Paths = []string{fmt.Sprintf("/s%d/", i)}
		}
		routes = append(routes, r)
	}
	routes = append(routes,
		Route{ID: int64(n + 1)},
		Route{ID: int64(n + 2), Paths: []string{"~/[a-z]+/legacy"}},
	)
	tbl, err := NewTable(routes)
	if err != nil {
		b.Fatal(err)
	}

	reqs := make([]Request, samples)
	want := make([]int64, samples)
	header := http.Header{"X-Env": {"prod"}, "Accept": {"application/json"}}
	for j := range samples {
		i := j * n / samples
		if n < samples {
			i = j % n
		}
		req := Request{Method: "GET", Header: header}
		switch k := i % 20; {
		case k == 0 || k == 10:
			req.Host = fmt.Sprintf("h%d.example.com", i)
			req.Path = fmt.Sprintf("/r%d/123/items/9", i)
		case k <= 8:
			req.Host = fmt.Sprintf("h%d.example.com:8443", i)
			req.Path = fmt.Sprintf("/api%d/v2/users/42", i)
		case k <= 14:
			req.Host = fmt.Sprintf("x.y.t%d.example.net", i)
			req.Path = fmt.Sprintf("/svc%d/orders", i)
		case k <= 17:
			req.Host = "unknown.example.com"
			req.Path = fmt.Sprintf("/pub%d/file.css", i)
		default:
			req.Host = "shared.example.org"
			req.Path = fmt.Sprintf("/s%d/thing", i)
		}
		reqs[j] = req
		want[j] = int64(i + 1)
	}
	return tbl, reqs, want
}

func BenchmarkMatch(b *testing.B) { benchMatch(b, []int{10, 1000, 10000, 50000}, 1024) }

// BenchmarkMatchEveryRoute is BenchmarkMatch with a request for every
// route (65,536 requests over the 50,000 routes) instead of 1,024 spread
// over them: the cache then holds no part of the table from one pass over
// the requests to the next, as with traffic to every tenant at once. The
// requests themselves take memory too (about 6 MB), so this overstates
// the cost a little.
func BenchmarkMatchEveryRoute(b *testing.B) { benchMatch(b, []int{10, 50000}, 65536) }

func benchMatch(b *testing.B, sizes []int, samples int) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			tbl, reqs, want := benchTableSamples(b, n, samples)
			// A benchmark of wrong answers is worthless: check them all
			// before timing.
			for j, req := range reqs {
				if got := tbl.Match(req); got.Route == nil || got.Route.ID != want[j] {
					b.Fatalf("Match(%+v) = %+v; want route %d", req, got.Route, want[j])
				}
			}
			b.ReportAllocs()
			// b.Loop times only the loop, keeping the setup above out.
			for i := 0; b.Loop(); i++ {
				tbl.Match(reqs[i&(len(reqs)-1)])
			}
		})
	}
}

// BenchmarkTableHeap reports the heap a table of 50,000 routes keeps alive
// (bytes per route after a forced GC, route values included), and the cost
// of one route update (With) on it.
func BenchmarkTableHeap(b *testing.B) {
	const n = 50000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tbl, _, _ := benchTable(b, n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perRoute := float64(after.HeapAlloc-before.HeapAlloc) / n
	r := *tbl.Route(2)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Priority = int32(i)
		next, err := tbl.With([]Route{r}, nil)
		if err != nil {
			b.Fatal(err)
		}
		tbl = next
	}
	b.ReportMetric(perRoute, "heap-B/route") // after the loop: ResetTimer clears metrics
	runtime.KeepAlive(tbl)
}
