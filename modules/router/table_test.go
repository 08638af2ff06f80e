package router

import (
	"fmt"
	"math/rand"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
)

func newTestTable(t *testing.T, routes []Route) *Table {
	t.Helper()
	tbl, err := NewTable(routes)
	if err != nil {
		t.Fatalf("NewTable: %v", err)
	}
	return tbl
}

func TestMatch(t *testing.T) {
	hostClasses := []Route{
		{ID: 1, Paths: []string{"/"}},
		{ID: 2, Hosts: []string{"*.example.com"}, Paths: []string{"/"}},
		{ID: 3, Hosts: []string{"a.example.com"}, Paths: []string{"/"}},
	}
	prefixes := []Route{
		{ID: 2, Paths: []string{"/api"}},
		{ID: 3, Paths: []string{"/api/v1"}},
		{ID: 4, Paths: []string{"/apb"}},
		{ID: 5, Paths: []string{"/a"}},
	}

	tests := []struct {
		name     string
		routes   []Route
		req      Request
		wantID   int64 // 0: no match
		wantPath string
	}{
		// Hosts.
		{"exact host beats wildcard and none", hostClasses,
			Request{Host: "a.example.com", Path: "/x"}, 3, "/"},
		{"wildcard host beats none", hostClasses,
			Request{Host: "b.example.com", Path: "/x"}, 2, "/"},
		{"no-host route for other hosts", hostClasses,
			Request{Host: "other.org", Path: "/x"}, 1, "/"},
		{"no-host route for empty host", hostClasses,
			Request{Path: "/x"}, 1, "/"},
		{"port ignored", hostClasses,
			Request{Host: "a.example.com:8443", Path: "/x"}, 3, "/"},
		{"request host case ignored", hostClasses,
			Request{Host: "A.Example.COM", Path: "/x"}, 3, "/"},
		{"trailing dot names the same host", hostClasses,
			Request{Host: "a.example.com.", Path: "/x"}, 3, "/"},
		{"trailing dot before the port", hostClasses,
			Request{Host: "A.example.com.:8443", Path: "/x"}, 3, "/"},
		{"trailing dot, wildcard", hostClasses,
			Request{Host: "b.example.com.", Path: "/x"}, 2, "/"},
		{"route hosts with a trailing dot",
			[]Route{{ID: 1, Hosts: []string{"api.example.com."}}, {ID: 2, Hosts: []string{"*.example.org."}}},
			Request{Host: "x.example.org", Path: "/"}, 2, ""},
		{"exact route host with a trailing dot",
			[]Route{{ID: 1, Hosts: []string{"api.example.com."}}, {ID: 2, Hosts: []string{"*.example.org."}}},
			Request{Host: "api.example.com", Path: "/"}, 1, ""},
		{"route host case ignored",
			[]Route{{ID: 1, Hosts: []string{"API.Example.com"}}, {ID: 2, Hosts: []string{"*.EXAMPLE.org"}}},
			Request{Host: "x.example.org", Path: "/"}, 2, ""},
		{"route host upper case, request lower case",
			[]Route{{ID: 1, Hosts: []string{"API.Example.com"}}},
			Request{Host: "api.example.com", Path: "/"}, 1, ""},
		{"multi-level wildcard", hostClasses,
			Request{Host: "x.y.example.com", Path: "/x"}, 2, "/"},
		{"wildcard does not match bare domain",
			[]Route{{ID: 1, Hosts: []string{"*.example.com"}}},
			Request{Host: "example.com", Path: "/"}, 0, ""},
		{"wildcard does not match bare domain, falls to no-host", hostClasses,
			Request{Host: "example.com", Path: "/x"}, 1, "/"},
		{"wildcard does not match empty label",
			[]Route{{ID: 1, Hosts: []string{"*.example.com"}}},
			Request{Host: ".example.com", Path: "/"}, 0, ""},
		{"wildcard does not match a mere suffix",
			[]Route{{ID: 1, Hosts: []string{"*.example.com"}}},
			Request{Host: "xexample.com", Path: "/"}, 0, ""},
		{"host route does not match other host",
			[]Route{{ID: 1, Hosts: []string{"a.com"}}},
			Request{Host: "b.com", Path: "/"}, 0, ""},
		{"two wildcard matches rank alike: lower id",
			[]Route{{ID: 1, Hosts: []string{"*.example.com"}}, {ID: 2, Hosts: []string{"*.api.example.com"}}},
			Request{Host: "x.api.example.com", Path: "/"}, 1, ""},
		{"two wildcard matches: longer path wins whatever the suffix",
			[]Route{
				{ID: 1, Hosts: []string{"*.example.com"}, Paths: []string{"/long/path"}},
				{ID: 2, Hosts: []string{"*.api.example.com"}},
			},
			Request{Host: "x.api.example.com", Path: "/long/path"}, 1, "/long/path"},
		{"two wildcard matches: more conditions win whatever the suffix",
			[]Route{
				{ID: 1, Hosts: []string{"*.api.example.com"}},
				{ID: 2, Hosts: []string{"*.example.com"}, Methods: []string{"GET"}},
			},
			Request{Host: "x.api.example.com", Path: "/", Method: "GET"}, 2, ""},
		{"exact beats longer wildcard",
			[]Route{{ID: 1, Hosts: []string{"x.api.example.com"}}, {ID: 2, Hosts: []string{"*.api.example.com"}}},
			Request{Host: "x.api.example.com", Path: "/"}, 1, ""},
		{"route with several hosts uses its best host match",
			[]Route{
				{ID: 1, Hosts: []string{"*.example.com", "a.example.com"}, Paths: []string{"/a"}},
				{ID: 2, Hosts: []string{"a.example.com"}, Paths: []string{"/"}},
			},
			Request{Host: "a.example.com", Path: "/a"}, 1, "/a"},
		{"duplicate hosts in one route",
			[]Route{{ID: 1, Hosts: []string{"a.com", "A.com", "a.com"}, Paths: []string{"/x", "/x"}}},
			Request{Host: "a.com", Path: "/x/y"}, 1, "/x"},
		{"bracketed IPv6 with port",
			[]Route{{ID: 1, Hosts: []string{"::1"}}},
			Request{Host: "[::1]:8080", Path: "/"}, 1, ""},
		{"bracketed IPv6 route host",
			[]Route{{ID: 1, Hosts: []string{"[::1]"}}},
			Request{Host: "[::1]", Path: "/"}, 1, ""},
		{"bare IPv6 is not split at a colon",
			[]Route{{ID: 1, Hosts: []string{"fe80::1"}}},
			Request{Host: "fe80::1", Path: "/"}, 1, ""},
		// nginx and Express read a host up to its first colon.
		{"more colons: the host ends at the first", hostClasses,
			Request{Host: "a.example.com:1:2", Path: "/x"}, 3, "/"},
		{"more colons, wildcard", hostClasses,
			Request{Host: "b.example.com:80:x", Path: "/x"}, 2, "/"},

		// Literal paths.
		{"longest literal prefix wins", prefixes,
			Request{Path: "/api/v1/users"}, 3, "/api/v1"},
		{"shorter literal prefix", prefixes,
			Request{Path: "/api/v2"}, 2, "/api"},
		{"no segment boundary rule", prefixes,
			Request{Path: "/apix"}, 2, "/api"},
		{"sibling after a radix split", prefixes,
			Request{Path: "/apb/1"}, 4, "/apb"},
		{"shortest prefix", prefixes,
			Request{Path: "/ab"}, 5, "/a"},
		{"no literal prefix matches", prefixes,
			Request{Path: "/b"}, 0, ""},
		{"path shorter than the prefix", prefixes,
			Request{Path: "/ap"}, 5, "/a"},
		{"route's longest own entry counts",
			[]Route{{ID: 5, Paths: []string{"/a", "/a/b/c"}}, {ID: 2, Paths: []string{"/a/b"}}},
			Request{Path: "/a/b/c/d"}, 5, "/a/b/c"},
		{"empty paths match with empty portion",
			[]Route{{ID: 1}},
			Request{Path: "/anything"}, 1, ""},
		{"literal / beats empty paths",
			[]Route{{ID: 1}, {ID: 2, Paths: []string{"/"}}},
			Request{Path: "/anything"}, 2, "/"},
		{"empty paths match an empty path",
			[]Route{{ID: 1}, {ID: 2, Paths: []string{"/"}}},
			Request{Path: ""}, 1, ""},

		// Regex paths.
		{"regex anchored at start",
			[]Route{{ID: 1, Paths: []string{"~/v[0-9]+/items"}}},
			Request{Path: "/api/v1/items"}, 0, ""},
		{"regex matched portion",
			[]Route{{ID: 1, Paths: []string{"~/v[0-9]+/items"}}},
			Request{Path: "/v12/items/7"}, 1, "/v12/items"},
		{"regex beats shorter literal",
			[]Route{{ID: 1, Paths: []string{"/users"}}, {ID: 2, Paths: []string{"~/users/[0-9]+"}}},
			Request{Path: "/users/42/posts"}, 2, "/users/42"},
		{"literal wins when the regex does not match",
			[]Route{{ID: 1, Paths: []string{"/users"}}, {ID: 2, Paths: []string{"~/users/[0-9]+"}}},
			Request{Path: "/users/me"}, 1, "/users"},
		{"longer literal beats shorter regex",
			[]Route{{ID: 2, Paths: []string{"/users/42/posts"}}, {ID: 1, Paths: []string{"~/users/[0-9]+"}}},
			Request{Path: "/users/42/posts"}, 2, "/users/42/posts"},
		{"regex without literal prefix",
			[]Route{{ID: 1, Paths: []string{"~[a-z/]+/legacy"}}},
			Request{Path: "/x/legacy/y"}, 1, "/x/legacy"},
		{"case-insensitive regex",
			[]Route{{ID: 1, Paths: []string{"~(?i)/ADMIN"}}},
			Request{Path: "/admin/x"}, 1, "/admin"},
		{"regex alternation at top level stays anchored",
			[]Route{{ID: 1, Paths: []string{"~/a|/b"}}},
			Request{Path: "/x/b"}, 0, ""},
		{"regex portion is the leftmost-first match",
			[]Route{{ID: 1, Paths: []string{"~/a|/ab"}}},
			Request{Path: "/abc"}, 1, "/a"},
		{"route's regex and literal entries, longest counts",
			[]Route{{ID: 5, Paths: []string{"/u", "~/u/[0-9]+"}}, {ID: 2, Paths: []string{"/u/1"}}},
			Request{Path: "/u/123"}, 5, "/u/123"},
		{"regex route in a host bucket",
			[]Route{
				{ID: 1, Hosts: []string{"a.com"}, Paths: []string{"/"}},
				{ID: 2, Hosts: []string{"a.com"}, Paths: []string{"~/[0-9]+"}},
			},
			Request{Host: "a.com", Path: "/42"}, 2, "/42"},
		{"higher-priority regex after a literal match",
			[]Route{
				{ID: 1, Hosts: []string{"a.com"}, Paths: []string{"/x/1/2/3"}},
				{ID: 2, Priority: 5, Paths: []string{"~/x/[0-9]"}},
			},
			Request{Host: "a.com", Path: "/x/1/2/3"}, 2, "/x/1"},
		{"regex in a lower host class loses",
			[]Route{
				{ID: 2, Hosts: []string{"a.com"}, Paths: []string{"/"}},
				{ID: 1, Paths: []string{"~/x/[0-9]+"}},
			},
			Request{Host: "a.com", Path: "/x/1"}, 2, "/"},

		// Methods and headers.
		{"method listed",
			[]Route{{ID: 1}, {ID: 2, Methods: []string{"GET", "POST"}}},
			Request{Method: "POST", Path: "/"}, 2, ""},
		{"method not listed",
			[]Route{{ID: 1}, {ID: 2, Methods: []string{"GET", "POST"}}},
			Request{Method: "DELETE", Path: "/"}, 1, ""},
		{"method case-insensitive",
			[]Route{{ID: 2, Methods: []string{"get"}}},
			Request{Method: "GET", Path: "/"}, 2, ""},
		{"request method case-insensitive",
			[]Route{{ID: 2, Methods: []string{"POST"}}},
			Request{Method: "post", Path: "/"}, 2, ""},
		{"custom method",
			[]Route{{ID: 1}, {ID: 2, Methods: []string{"GET", "purge"}}},
			Request{Method: "PURGE", Path: "/"}, 2, ""},
		{"custom method not listed",
			[]Route{{ID: 1}, {ID: 2, Methods: []string{"PURGE"}}},
			Request{Method: "GET", Path: "/"}, 1, ""},
		{"method and header both required",
			[]Route{{ID: 1}, {ID: 2, Methods: []string{"GET"}, Headers: map[string]string{"X-Env": "*"}}},
			Request{Method: "POST", Path: "/", Header: http.Header{"X-Env": {"1"}}}, 1, ""},
		{"header * with empty value",
			[]Route{{ID: 1}, {ID: 2, Headers: map[string]string{"X-Env": "*"}}},
			Request{Path: "/", Header: http.Header{"X-Env": {""}}}, 2, ""},
		{"header * absent",
			[]Route{{ID: 1}, {ID: 2, Headers: map[string]string{"X-Env": "*"}}},
			Request{Path: "/", Header: http.Header{"X-Other": {"1"}}}, 1, ""},
		{"header * with nil header",
			[]Route{{ID: 2, Headers: map[string]string{"X-Env": "*"}}},
			Request{Path: "/"}, 0, ""},
		{"header name case-insensitive",
			[]Route{{ID: 2, Headers: map[string]string{"x-ENV": "prod"}}},
			Request{Path: "/", Header: http.Header{"X-Env": {"prod"}}}, 2, ""},
		{"header value case-sensitive",
			[]Route{{ID: 2, Headers: map[string]string{"X-Env": "prod"}}},
			Request{Path: "/", Header: http.Header{"X-Env": {"Prod"}}}, 0, ""},
		{"header value among several",
			[]Route{{ID: 2, Headers: map[string]string{"X-Env": "prod"}}},
			Request{Path: "/", Header: http.Header{"X-Env": {"dev", "prod"}}}, 2, ""},
		{"every header must match",
			[]Route{{ID: 1}, {ID: 2, Headers: map[string]string{"X-Env": "prod", "X-Team": "a"}}},
			Request{Path: "/", Header: http.Header{"X-Env": {"prod"}}}, 1, ""},

		// Precedence.
		{"priority beats host, path and conditions",
			[]Route{
				{ID: 1, Hosts: []string{"a.com"}, Paths: []string{"/api/v1"}, Methods: []string{"GET"},
					Headers: map[string]string{"X-Env": "prod"}},
				{ID: 9, Priority: 1},
			},
			Request{Host: "a.com", Path: "/api/v1", Method: "GET", Header: http.Header{"X-Env": {"prod"}}}, 9, ""},
		{"higher-priority wildcard beats exact",
			[]Route{{ID: 1, Hosts: []string{"a.b.com"}}, {ID: 2, Priority: 1, Hosts: []string{"*.com"}}},
			Request{Host: "a.b.com", Path: "/"}, 2, ""},
		{"higher-priority shorter wildcard beats longer",
			[]Route{{ID: 1, Hosts: []string{"*.b.com"}}, {ID: 2, Priority: 1, Hosts: []string{"*.com"}}},
			Request{Host: "a.b.com", Path: "/"}, 2, ""},
		{"negative priority loses",
			[]Route{{ID: 1, Priority: -1, Hosts: []string{"a.com"}}, {ID: 9}},
			Request{Host: "a.com", Path: "/"}, 9, ""},
		{"host class beats longer path",
			[]Route{{ID: 1, Paths: []string{"/api/v1/long"}}, {ID: 9, Hosts: []string{"*.com"}}},
			Request{Host: "a.com", Path: "/api/v1/long"}, 9, ""},
		{"longer path beats conditions",
			[]Route{{ID: 1, Paths: []string{"/a"}, Methods: []string{"GET"}}, {ID: 9, Paths: []string{"/ab"}}},
			Request{Path: "/ab", Method: "GET"}, 9, "/ab"},
		{"condition count tie-break",
			[]Route{
				{ID: 1, Paths: []string{"/a"}},
				{ID: 2, Paths: []string{"/a"}, Headers: map[string]string{"X-Env": "prod"}},
				{ID: 3, Paths: []string{"/a"}, Methods: []string{"GET", "PUT"}, Headers: map[string]string{"X-Env": "*"}},
			},
			Request{Path: "/a", Method: "GET", Header: http.Header{"X-Env": {"prod"}}}, 3, "/a"},
		{"condition count: two headers beat method and header",
			[]Route{
				{ID: 1, Methods: []string{"GET"}, Headers: map[string]string{"X-A": "*"}},
				{ID: 2, Headers: map[string]string{"X-A": "*", "X-B": "*", "X-C": "*"}},
			},
			Request{Path: "/", Method: "GET", Header: http.Header{"X-A": {""}, "X-B": {""}, "X-C": {""}}}, 2, ""},
		{"lower id last",
			[]Route{{ID: 7, Paths: []string{"/a"}}, {ID: 4, Paths: []string{"/a"}}, {ID: 5, Paths: []string{"/a"}}},
			Request{Path: "/a"}, 4, "/a"},
		{"lower id after everything else",
			[]Route{{ID: 7, Hosts: []string{"*.b.com"}}, {ID: 4, Hosts: []string{"*.b.com"}}},
			Request{Host: "a.b.com", Path: "/"}, 4, ""},
		{"failing best candidate falls through to next",
			[]Route{
				{ID: 1, Paths: []string{"/a"}},
				{ID: 2, Paths: []string{"/a"}, Methods: []string{"POST"}},
			},
			Request{Path: "/a", Method: "GET"}, 1, "/a"},

		{"empty table", nil, Request{Path: "/"}, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tbl := newTestTable(t, tc.routes)
			got := tbl.Match(tc.req)
			var gotID int64
			if got.Route != nil {
				gotID = got.Route.ID
			}
			if gotID != tc.wantID || got.MatchedPath != tc.wantPath {
				t.Errorf("Match(%+v) = route %d, matched %q; want route %d, matched %q",
					tc.req, gotID, got.MatchedPath, tc.wantID, tc.wantPath)
			}
		})
	}
}

func TestMatchNilTable(t *testing.T) {
	var tbl *Table
	if got := tbl.Match(Request{Path: "/"}); got.Route != nil {
		t.Errorf("nil table matched route %d", got.Route.ID)
	}
	if tbl.Len() != 0 {
		t.Errorf("nil table Len = %d", tbl.Len())
	}
}

func TestMatchReturnsOwnCopy(t *testing.T) {
	routes := []Route{{ID: 1, Name: "a", Paths: []string{"/"}}}
	tbl := newTestTable(t, routes)
	routes[0].Name = "changed"
	if got := tbl.Match(Request{Path: "/"}); got.Route == nil || got.Route.Name != "a" {
		t.Errorf("Match = %+v; want the route as it was at NewTable", got.Route)
	}
}

func TestNewTableBadRegex(t *testing.T) {
	for _, p := range []string{"~(", "~a)(b", "~[z-a]"} {
		_, err := NewTable([]Route{{ID: 7, Paths: []string{p}}})
		if err == nil || !strings.Contains(err.Error(), "route 7") {
			t.Errorf("NewTable with path %q: err = %v; want an error naming route 7", p, err)
		}
	}
}

func TestLen(t *testing.T) {
	tbl := newTestTable(t, []Route{{ID: 1}, {ID: 2, Hosts: []string{"a.com", "*.a.com"}}, {ID: 3}})
	if tbl.Len() != 3 {
		t.Errorf("Len = %d; want 3", tbl.Len())
	}
}

func TestMatchAllocs(t *testing.T) {
	tbl := newTestTable(t, []Route{
		{ID: 1, Hosts: []string{"a.example.com"}, Paths: []string{"/api", "/api/v1"}, Methods: []string{"GET"}},
		{ID: 2, Hosts: []string{"*.example.com"}, Paths: []string{"/api"}, Headers: map[string]string{"X-Env": "*"}},
		{ID: 3, Paths: []string{"/"}},
		{ID: 4, Hosts: []string{"b.example.com"}, Paths: []string{"~/r/[0-9]+"}},
	})
	req := Request{
		Host:   "a.example.com:8443",
		Path:   "/api/v1/users",
		Method: "GET",
		Header: http.Header{"X-Env": {"prod"}},
	}
	var got Match
	allocs := testing.AllocsPerRun(100, func() { got = tbl.Match(req) })
	if got.Route == nil || got.Route.ID != 1 {
		t.Fatalf("Match = %+v; want route 1", got)
	}
	if allocs != 0 {
		t.Errorf("Match allocates %v times per call; want 0", allocs)
	}
}

func TestUpstreamPath(t *testing.T) {
	strip := &Route{StripPath: true}
	keep := &Route{}
	tests := []struct {
		name    string
		route   *Route
		matched string
		path    string
		want    string
	}{
		{"strip to empty becomes /", strip, "/api", "/api", "/"},
		{"strip keeps rest", strip, "/api", "/api/users", "/users"},
		{"rest without slash gets one", strip, "/api", "/apix/y", "/x/y"},
		{"strip matched with trailing slash", strip, "/api/", "/api/users", "/users"},
		{"strip regex portion", strip, "/v12/items", "/v12/items/7", "/7"},
		{"empty matched portion", strip, "", "/a/b", "/a/b"},
		{"empty matched portion, empty path", strip, "", "", "/"},
		{"strip_path false unchanged", keep, "/api", "/api/users", "/api/users"},
		{"strip_path false keeps odd path", keep, "/api", "/api", "/api"},
		{"nil route unchanged", nil, "/api", "/api/users", "/api/users"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := UpstreamPath(tc.route, tc.matched, tc.path); got != tc.want {
				t.Errorf("UpstreamPath(%q, %q) = %q; want %q", tc.matched, tc.path, got, tc.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	routes := []Route{
		{ID: 1, Hosts: []string{"a.com"}, Paths: []string{"/api"}, Methods: []string{"GET", "POST"}},
		{ID: 2, Hosts: []string{"a.com"}, Paths: []string{"/api"}, Methods: []string{"GET", "PUT"}},
		{ID: 3, Hosts: []string{"b.com"}, Paths: []string{"/svc"}, Headers: map[string]string{"X-Env": "prod"}},
		{ID: 4, Hosts: []string{"*.c.com"}, Paths: []string{"~/v[0-9]+"}},
	}
	tbl := newTestTable(t, routes)
	tests := []struct {
		req  Request
		want string
	}{
		{Request{Host: "X.com:80", Path: "/", Method: "GET"}, `no route matches host "x.com"`},
		{Request{Host: "a.com", Path: "/nope", Method: "GET"}, `no route matches path "/nope" on host "a.com"`},
		{Request{Host: "x.c.com", Path: "/api/v1", Method: "GET"}, `no route matches path "/api/v1" on host "x.c.com"`},
		{Request{Host: "a.com", Path: "/api/x", Method: "DELETE"},
			`method DELETE not allowed by the routes matching "/api/x" (allowed: GET, POST, PUT)`},
		{Request{Host: "b.com", Path: "/svc", Method: "GET"}, `header X-Env is missing`},
		{Request{Host: "b.com", Path: "/svc", Method: "GET", Header: http.Header{"X-Env": {"dev"}}},
			`header X-Env does not match`},
	}
	for _, tc := range tests {
		if m := tbl.Match(tc.req); m.Route != nil {
			t.Fatalf("Match(%+v) = route %d; the case needs no match", tc.req, m.Route.ID)
		}
		if got := tbl.Explain(tc.req); got != tc.want {
			t.Errorf("Explain(%+v) = %q; want %q", tc.req, got, tc.want)
		}
	}

	noHost := newTestTable(t, []Route{{ID: 1, Paths: []string{"/a"}}})
	if got, want := noHost.Explain(Request{Path: "/b"}), `no route matches path "/b"`; got != want {
		t.Errorf("Explain = %q; want %q", got, want)
	}
	empty := newTestTable(t, nil)
	if got := empty.Explain(Request{Path: "/"}); got == "" {
		t.Error("Explain on an empty table returned no reason")
	}
}

// TestMatchAgainstScan checks the index against a plain scan of every route
// that spells out docs/routing.md directly, on random tables and requests drawn
// from a small vocabulary so that overlaps and ties are frequent.
func TestMatchAgainstScan(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	hosts := []string{"a.com", "b.a.com", "*.a.com", "*.b.a.com", "*.com", "c.b.a.com"}
	reqHosts := []string{"a.com", "b.a.com", "c.b.a.com", "x.c.b.a.com", "d.com", "", "A.COM:80"}
	paths := []string{"/", "/a", "/ab", "/abc", "/a/b", "/b", "~/a[a-z]", "~/a/?", "~/[ab]+", "~(?i)/A", ""}
	reqPaths := []string{"/", "/a", "/ab", "/abc", "/abcd", "/a/b/c", "/b", "/ba", "", "/A"}
	methods := []string{"GET", "POST", "PUT", "get", "PURGE"}
	pick := func(list []string, max int) []string {
		var out []string
		for range rng.Intn(max + 1) {
			out = append(out, list[rng.Intn(len(list))])
		}
		return out
	}
	for round := range 300 {
		routes := make([]Route, 1+rng.Intn(12))
		ids := rng.Perm(50) // ids are unique in a table
		for i := range routes {
			r := &routes[i]
			r.ID = int64(ids[i] + 1)
			r.Priority = int32(rng.Intn(3) - 1)
			r.Hosts = pick(hosts, 2)
			r.Paths = pick(paths, 2)
			r.Methods = pick(methods, 2)
			if rng.Intn(3) == 0 {
				r.Headers = map[string]string{"X-A": []string{"*", "1", "2"}[rng.Intn(3)]}
				if rng.Intn(2) == 0 {
					r.Headers["x-b"] = "1"
				}
			}
		}
		tbl := newTestTable(t, routes)
		for range 50 {
			req := Request{
				Host:   reqHosts[rng.Intn(len(reqHosts))],
				Path:   reqPaths[rng.Intn(len(reqPaths))],
				Method: methods[rng.Intn(len(methods))],
				Header: http.Header{},
			}
			if rng.Intn(2) == 0 {
				req.Header["X-A"] = []string{[]string{"1", "2", ""}[rng.Intn(3)]}
			}
			if rng.Intn(2) == 0 {
				req.Header["X-B"] = []string{"1"}
			}
			got := tbl.Match(req)
			want := scanMatch(routes, req)
			if (got.Route == nil) != (want.Route == nil) ||
				got.Route != nil && (got.Route.ID != want.Route.ID || got.MatchedPath != want.MatchedPath) {
				t.Fatalf("round %d: Match(%+v) = %s; scan says %s\nroutes: %+v",
					round, req, describe(got), describe(want), routes)
			}
		}
	}
}

func describe(m Match) string {
	if m.Route == nil {
		return "no match"
	}
	return fmt.Sprintf("route %d (%p) matched %q", m.Route.ID, m.Route, m.MatchedPath)
}

// scanMatch is the reference: every route, every rule, no index. With
// duplicate ids the scan keeps the first route in slice order, which may
// differ from the table; the comparison above only looks at ids.
func scanMatch(routes []Route, req Request) Match {
	host := strings.ToLower(req.Host)
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	type score struct {
		prio          int32
		class, suffix int
		pathLen       int
		conds         int
		id            int64
	}
	better := func(a, b score) bool {
		for _, d := range []int64{
			int64(a.prio) - int64(b.prio), int64(a.class - b.class),
			int64(a.pathLen - b.pathLen), int64(a.conds - b.conds), b.id - a.id,
		} {
			if d != 0 {
				return d > 0
			}
		}
		return false
	}
	var best score
	var out Match
	for i := range routes {
		r := &routes[i]
		s := score{prio: r.Priority, id: r.ID, class: -1}
		if len(r.Hosts) == 0 {
			s.class = 0
		}
		for _, h := range r.Hosts {
			h = strings.ToLower(h)
			if h == host {
				s.class, s.suffix = 2, 0
			} else if suffix, ok := strings.CutPrefix(h, "*"); ok && s.class < 2 &&
				strings.HasSuffix(host, suffix) && len(host) > len(suffix) && len(suffix) > s.suffix {
				s.class, s.suffix = 1, len(suffix)
			}
		}
		if s.class < 0 {
			continue
		}
		s.pathLen = -1
		if len(r.Paths) == 0 {
			s.pathLen = 0
		}
		for _, p := range r.Paths {
			if expr, ok := strings.CutPrefix(p, "~"); ok {
				if loc := scanRegexp(expr).FindStringIndex(req.Path); loc != nil {
					s.pathLen = max(s.pathLen, loc[1])
				}
			} else if strings.HasPrefix(req.Path, p) {
				s.pathLen = max(s.pathLen, len(p))
			}
		}
		if s.pathLen < 0 {
			continue
		}
		if len(r.Methods) > 0 {
			ok := false
			for _, m := range r.Methods {
				ok = ok || strings.EqualFold(m, req.Method)
			}
			if !ok {
				continue
			}
			s.conds++
		}
		ok := true
		for name, value := range r.Headers {
			values, present := req.Header[http.CanonicalHeaderKey(name)]
			ok = ok && present && (value == "*" || contains(values, value))
			s.conds++
		}
		if !ok {
			continue
		}
		if out.Route == nil || better(s, best) {
			best, out = s, Match{Route: r, MatchedPath: req.Path[:s.pathLen]}
		}
	}
	return out
}

var scanRegexps sync.Map // expr → *regexp.Regexp

// scanRegexp compiles a path expression the plain way, once.
func scanRegexp(expr string) *regexp.Regexp {
	if re, ok := scanRegexps.Load(expr); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile("^(?:" + expr + ")")
	scanRegexps.Store(expr, re)
	return re
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestResolveParams: a path whose ";parameters", cut as Tomcat, Jetty and
// Spring cut them, pick another route (or none) is ErrPathParams.
func TestResolveParams(t *testing.T) {
	tbl := newTestTable(t, []Route{
		{ID: 1, Paths: []string{"/public"}},
		{ID: 2, Paths: []string{"/admin/"}},
		{ID: 3},
	})
	for path, want := range map[string]int64{
		"/admin/x;jsessionid=1": 2,
		"/admin/a;b/c":          2,
		"/public;v=1/x":         1,
		"/x;y":                  3,
		"/public/..;/admin/x":   0,
		"/;/admin/x":            0,
		"/admin;x/y":            0,
		"/public\\..;\\admin":   0, // a backslash dot segment once cut
	} {
		_, m, err := tbl.Resolve(Request{Path: path})
		switch {
		case want == 0 && err == nil:
			t.Errorf("%s: route %v, want an error", path, m.Route)
		case want != 0 && (err != nil || m.Route == nil || m.Route.ID != want):
			t.Errorf("%s: %v, %v; want route %d", path, m.Route, err, want)
		}
	}
}

// TestResolveMethodOverride: a method override header naming a method that
// another route (or none) is picked for is ErrMethodOverride; one the
// matched route serves anyway is not; without such headers Resolve
// allocates nothing more than Match.
func TestResolveMethodOverride(t *testing.T) {
	tbl := newTestTable(t, []Route{
		{ID: 1, Paths: []string{"/items"}, Methods: []string{"GET", "POST"}},
		{ID: 2, Paths: []string{"/items"}, Methods: []string{"DELETE"}},
		{ID: 3, Paths: []string{"/any"}},
	})
	for _, tc := range []struct {
		path, name, value string
		err               bool
	}{
		{"/items", "X-Http-Method-Override", "DELETE", true},
		{"/items", "X-Http-Method", "delete", true},
		{"/items", "X-Method-Override", "GET,PUT", true},
		{"/items", "X-Http-Method-Override", "GET", false},
		{"/items", "X-Http-Method-Override", " post ", false},
		{"/any", "X-Http-Method-Override", "DELETE", false},
		{"/nothing", "X-Http-Method-Override", "DELETE", false}, // no route: 404 anyway
		{"/any", "X-Http-Method-Override", "A,B,C,D,E,F,G,H", false},
		{"/any", "X-Http-Method-Override", "A,B,C,D,E,F,G,H,I", true}, // more than maxOverrides: refused, not matched each
	} {
		req := Request{Path: tc.path, Method: "POST", Header: http.Header{tc.name: {tc.value}}}
		if _, _, err := tbl.Resolve(req); (err != nil) != tc.err || (err != nil && err != ErrMethodOverride) {
			t.Errorf("%s %s: %s: err = %v; want error %v", tc.path, tc.name, tc.value, err, tc.err)
		}
	}
	req := Request{Path: "/items", Method: "POST", Header: http.Header{"X-Env": {"prod"}, "Content-Type": {"text/plain"}}}
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = tbl.Resolve(req) }); allocs != 0 {
		t.Errorf("Resolve allocates %v times per call; want 0", allocs)
	}
}
