package router

import (
	"fmt"
	"math/rand"
	"net/http"
	"slices"
	"testing"
)

// TestWithMatchesNewTable updates random tables with random upserts and
// removals and checks that the updated table matches every request as a
// table built from scratch over the same routes does, that the table it
// was derived from still matches as before, and that its bookkeeping
// (ids, services) agrees.
func TestWithMatchesNewTable(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	hosts := []string{"a.com", "b.a.com", "*.a.com", "*.b.a.com", "*.com", "c.b.a.com"}
	reqHosts := []string{"a.com", "b.a.com", "c.b.a.com", "x.c.b.a.com", "d.com", ""}
	paths := []string{"/", "/a", "/ab", "/abc", "/a/b", "/b", "~/a[a-z]", "~/[ab]+", ""}
	reqPaths := []string{"/", "/a", "/ab", "/abc", "/abcd", "/a/b/c", "/b", "/ba"}
	methods := []string{"GET", "POST"}
	pick := func(list []string, max int) []string {
		var out []string
		for range rng.Intn(max + 1) {
			out = append(out, list[rng.Intn(len(list))])
		}
		return out
	}
	randomRoute := func(id int64) Route {
		r := Route{ID: id, Priority: int32(rng.Intn(3) - 1), ServiceID: int64(1 + rng.Intn(4)),
			Hosts: pick(hosts, 2), Paths: pick(paths, 2), Methods: pick(methods, 1)}
		if rng.Intn(4) == 0 {
			r.Splits = []Split{{ServiceID: int64(5 + rng.Intn(2)), Weight: 1}}
		}
		return r
	}
	requests := func() []Request {
		var out []Request
		for _, h := range reqHosts {
			for _, p := range reqPaths {
				for _, m := range methods {
					out = append(out, Request{Host: h, Path: p, Method: m, Header: http.Header{}})
				}
			}
		}
		return out
	}()
	results := func(tbl *Table) []string {
		out := make([]string, len(requests))
		for i, req := range requests {
			m := tbl.Match(req)
			if m.Route != nil {
				out[i] = fmt.Sprintf("%d %s", m.Route.ID, m.MatchedPath)
			}
		}
		return out
	}
	for round := range 200 {
		live := map[int64]Route{}
		for range rng.Intn(30) {
			id := int64(1 + rng.Intn(40))
			live[id] = randomRoute(id)
		}
		base, err := NewTable(slices.Collect(mapValues(live)))
		if err != nil {
			t.Fatal(err)
		}
		before := results(base)
		tbl := base
		for step := range 3 {
			var ups []Route
			var rm []int64
			for range rng.Intn(5) {
				id := int64(1 + rng.Intn(40))
				if rng.Intn(3) == 0 {
					rm = append(rm, id)
					delete(live, id)
				} else {
					r := randomRoute(id)
					ups = append(ups, r)
					live[id] = r
				}
			}
			// A removal listed after an upsert of the same id still
			// upserts (With's rule): keep the model in step.
			for _, r := range ups {
				live[r.ID] = r
			}
			next, err := tbl.With(ups, rm)
			if err != nil {
				t.Fatal(err)
			}
			want, err := NewTable(slices.Collect(mapValues(live)))
			if err != nil {
				t.Fatal(err)
			}
			if got, exp := results(next), results(want); !slices.Equal(got, exp) {
				for i := range got {
					if got[i] != exp[i] {
						t.Fatalf("round %d step %d: %+v: updated table matched %q, a new table %q", round, step, requests[i], got[i], exp[i])
					}
				}
			}
			if got, exp := next.Services(), want.Services(); !slices.Equal(got, exp) {
				t.Fatalf("round %d step %d: services %v, want %v", round, step, got, exp)
			}
			if next.Len() != want.Len() {
				t.Fatalf("round %d step %d: Len %d, want %d", round, step, next.Len(), want.Len())
			}
			for id, r := range live {
				if got := next.Route(id); got == nil || got.ServiceID != r.ServiceID {
					t.Fatalf("round %d step %d: Route(%d) = %v", round, step, id, got)
				}
				if next.RoutesOfService(r.ServiceID) == 0 {
					t.Fatalf("round %d step %d: RoutesOfService(%d) = 0", round, step, r.ServiceID)
				}
			}
			tbl = next
		}
		if after := results(base); !slices.Equal(before, after) {
			t.Fatalf("round %d: updates changed the table they were derived from", round)
		}
	}
}

func mapValues(m map[int64]Route) func(func(Route) bool) {
	return func(yield func(Route) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// TestWithLargeChangeRebuilds covers the rebuild path (many changes at
// once) and a bad regex, which leaves the table it was called on intact.
func TestWithLargeChangeRebuilds(t *testing.T) {
	var routes []Route
	for i := range 100 {
		routes = append(routes, Route{ID: int64(i + 1), ServiceID: 1, Paths: []string{fmt.Sprintf("/r%d", i)}})
	}
	tbl, err := NewTable(routes[:10])
	if err != nil {
		t.Fatal(err)
	}
	next, err := tbl.With(routes, []int64{3})
	if err != nil {
		t.Fatal(err)
	}
	if next.Len() != 100 || next.Match(Request{Path: "/r99"}).Route == nil || next.Match(Request{Path: "/r2"}).Route.ID != 3 {
		t.Fatalf("rebuilt table: Len %d", next.Len())
	}
	if _, err := next.With([]Route{{ID: 5, Paths: []string{"~a)(b"}}}, nil); err == nil {
		t.Fatal("a bad regex was accepted")
	}
	if m := next.Match(Request{Path: "/r4"}); m.Route == nil || m.Route.ID != 5 {
		t.Fatalf("a failed update changed the table: %+v", m.Route)
	}
}

// A gateway that keeps adding and removing routes (every route replaced,
// round after round, by small changes and by large ones) keeps a table
// the size of its live routes: freed entry slots are reused and the host
// index's shards do not grow with the number of hosts ever seen. (Both
// stay at the peak size after a peak: bounded, not shrunk.)
func TestWithChurnStaysBounded(t *testing.T) {
	hostSlots := func(x *hostIndex) int {
		n := 0
		for i := range x.shards {
			n += len(x.shards[i].slots)
		}
		return n
	}
	for _, batch := range []int{5, 50} { // 5: With's incremental path; 50: its rebuild
		var tbl *Table
		var id int64
		var live []int64
		for round := range 300 {
			ups := make([]Route, batch)
			for i := range ups {
				id++
				ups[i] = Route{ID: id, ServiceID: 1, Hosts: []string{fmt.Sprintf("h%d.example.com", id), fmt.Sprintf("*.w%d.example.com", id)}, Paths: []string{"/a"}}
			}
			var err error
			if tbl, err = tbl.With(ups, live); err != nil {
				t.Fatal(err)
			}
			live = live[:0]
			for _, r := range ups {
				live = append(live, r.ID)
			}
			if len(tbl.entries) != batch || len(tbl.slots) > batch || len(tbl.free) != len(tbl.slots)-batch {
				t.Fatalf("batch %d round %d: %d entries, %d slots, %d free", batch, round, len(tbl.entries), len(tbl.slots), len(tbl.free))
			}
			// a shard holds at most half its slots: 2 keys a route, 8 slots
			// a shard at least
			if n := hostSlots(&tbl.hosts); tbl.hosts.n != 2*batch || n > hostShards*8+8*2*batch {
				t.Fatalf("batch %d round %d: host index of %d keys has %d slots", batch, round, tbl.hosts.n, n)
			}
		}
	}
}
