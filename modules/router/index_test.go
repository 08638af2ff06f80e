package router

import (
	"fmt"
	"math/rand"
	"net/http"
	"slices"
	"testing"
)

// TestHostIndexAgainstMap drives the open-addressing host index with
// random inserts, replacements and removals (enough keys for long probe
// runs, growth and backward-shift deletions in every shard) and checks it
// against a Go map after every step, including copies taken earlier,
// which writes must not reach.
func TestHostIndexAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	type key struct {
		name  string
		class hostClass
	}
	var universe []key
	for i := range 3000 {
		universe = append(universe, key{fmt.Sprintf("h%d.example.com", i), hostExact})
		// The same name as a wildcard suffix must be a different key.
		if i%3 == 0 {
			universe = append(universe, key{fmt.Sprintf("h%d.example.com", i), hostWildcard})
		}
	}
	bucketFor := func(k key, version int) bucket {
		b := newBuilder(k.class, k.name)
		b.maxPriority = int32(version)
		return b.freeze()
	}
	check := func(step int, x *hostIndex, model map[key]int) {
		t.Helper()
		n := 0
		for _, k := range universe {
			b := x.get(k.name, k.class)
			v, ok := model[k]
			if ok {
				n++
			}
			switch {
			case ok && b == nil:
				t.Fatalf("step %d: %v missing", step, k)
			case !ok && b != nil:
				t.Fatalf("step %d: %v present after removal", step, k)
			case ok && (b.key() != k.name || b.class() != k.class || b.maxPriority() != int32(v)):
				t.Fatalf("step %d: %v holds %q/%d/%d, want version %d", step, k, b.key(), b.class(), b.maxPriority(), v)
			}
		}
		if x.n != n {
			t.Fatalf("step %d: n = %d, want %d", step, x.n, n)
		}
	}
	var x hostIndex
	model := map[key]int{}
	type snapshot struct {
		x     hostIndex
		model map[key]int
	}
	var snaps []snapshot
	for step := range 60 {
		if step%10 == 0 {
			snaps = append(snaps, snapshot{x, cloneMap(model)})
			x = x.shared()
		}
		for range 400 {
			k := universe[rng.Intn(len(universe))]
			if rng.Intn(3) == 0 {
				x.remove(k.name, k.class)
				delete(model, k)
			} else {
				model[k] = step*1000 + rng.Intn(1000)
				x.set(bucketFor(k, model[k]))
			}
		}
		check(step, &x, model)
	}
	for i, s := range snaps {
		check(-1-i, &s.x, s.model)
	}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestMatchManyRoutesAgainstScan is TestMatchAgainstScan at scale:
// thousands of routes over hundreds of exact hosts and wildcard suffixes
// at several depths, shared path prefixes (deep radix trees), regexes,
// methods, headers and priorities, checked request by request against the
// plain scan of docs/routing.md; then the table is updated with With
// (twice from the same base, as a failed and a retried change do) and
// checked again.
func TestMatchManyRoutesAgainstScan(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	var hosts, reqHosts []string
	for i := range 120 {
		h := fmt.Sprintf("h%d.t%d.example.com", i, i%7)
		hosts = append(hosts, h)
		reqHosts = append(reqHosts, h, "x."+h, "X.Y."+h+":8443")
	}
	for i := range 7 {
		hosts = append(hosts, fmt.Sprintf("*.t%d.example.com", i))
	}
	hosts = append(hosts, "*.example.com", "*.com", "*.h3.t3.example.com")
	reqHosts = append(reqHosts, "example.com", "other.org", "")
	segs := []string{"api", "v1", "v2", "users", "a", "ab", "abc", "1", "12", "x"}
	randPath := func() string {
		p := ""
		for range 1 + rng.Intn(4) {
			p += "/" + segs[rng.Intn(len(segs))]
		}
		if rng.Intn(4) == 0 {
			p += "/"
		}
		return p
	}
	regexTails := []string{"[0-9]+", "[a-z]+/?", "(v1|v2)/users", "(?i)ABC", ".*"}
	randRoute := func(id int64) Route {
		r := Route{ID: id, ServiceID: 1 + id%5, Priority: int32(rng.Intn(3) - 1)}
		for range rng.Intn(3) {
			r.Hosts = append(r.Hosts, hosts[rng.Intn(len(hosts))])
		}
		for range rng.Intn(3) {
			if rng.Intn(5) == 0 {
				r.Paths = append(r.Paths, "~"+randPath()+"/"+regexTails[rng.Intn(len(regexTails))])
			} else {
				r.Paths = append(r.Paths, randPath())
			}
		}
		switch rng.Intn(6) {
		case 0:
			r.Methods = []string{"GET"}
		case 1:
			r.Methods = []string{"POST", "put"}
		case 2:
			r.Methods = []string{"PURGE"}
		}
		if rng.Intn(8) == 0 {
			r.Headers = map[string]string{"X-Env": []string{"*", "prod"}[rng.Intn(2)]}
		}
		return r
	}
	requests := make([]Request, 600)
	for i := range requests {
		requests[i] = Request{
			Host:   reqHosts[rng.Intn(len(reqHosts))],
			Path:   randPath() + []string{"", "/42", "/users/7", "/ABC"}[rng.Intn(4)],
			Method: []string{"GET", "POST", "PUT", "PURGE"}[rng.Intn(4)],
			Header: http.Header{},
		}
		if rng.Intn(2) == 0 {
			requests[i].Header["X-Env"] = []string{"prod"}
		}
	}
	live := map[int64]Route{}
	for id := range int64(3000) {
		live[id+1] = randRoute(id + 1)
	}
	compare := func(what string, tbl *Table, live map[int64]Route) {
		t.Helper()
		routes := slices.Collect(mapValues(live))
		matched := 0
		defer func() {
			// A comparison of misses proves nothing: most requests match.
			if matched < len(requests)/2 {
				t.Fatalf("%s: only %d of %d requests matched", what, matched, len(requests))
			}
		}()
		for _, req := range requests {
			got, want := tbl.Match(req), scanMatch(routes, req)
			if got.Route != nil {
				matched++
			}
			if (got.Route == nil) != (want.Route == nil) ||
				got.Route != nil && (got.Route.ID != want.Route.ID || got.MatchedPath != want.MatchedPath) {
				t.Fatalf("%s: Match(%+v) = %s; scan says %s", what, req, describe(got), describe(want))
			}
		}
	}
	base := newTestTable(t, slices.Collect(mapValues(live)))
	compare("new table", base, live)

	update := func(from *Table, model map[int64]Route, n int) (*Table, map[int64]Route) {
		model = cloneMap(model)
		var ups []Route
		var rm []int64
		for range n {
			id := int64(1 + rng.Intn(3300))
			if rng.Intn(3) == 0 {
				rm = append(rm, id)
				delete(model, id)
			} else {
				ups = append(ups, randRoute(id))
			}
		}
		for _, r := range ups {
			model[r.ID] = r
		}
		next, err := from.With(ups, rm)
		if err != nil {
			t.Fatal(err)
		}
		return next, model
	}
	a, liveA := update(base, live, 40)
	b, liveB := update(base, live, 40) // a second change from the same base
	compare("first update", a, liveA)
	compare("second update from the same base", b, liveB)
	for step := range 5 {
		a, liveA = update(a, liveA, 20)
		compare(fmt.Sprintf("chained update %d", step), a, liveA)
	}
	big, liveBig := update(a, liveA, 1000) // the rebuild path
	compare("large update", big, liveBig)
	compare("base after updates", base, live)
	compare("second update after later updates", b, liveB)
}
