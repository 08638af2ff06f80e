package router

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestNormalizePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/", "/"},
		{"/a/b", "/a/b"},
		{"/public/../private/secret", "/private/secret"},
		{"/a/b/c/./../../g", "/a/g"}, // RFC 3986 §5.2.4's example
		{"/mid/content=5/../6", "/mid/6"},
		{"/api/../../etc", "/etc"}, // above the root: clamped at the root
		{"/../x", "/x"},
		{"/..", "/"},
		{"/.", "/"},
		{"/a/..", "/"},
		{"/a/.", "/a/"},
		{"/a/b/..", "/a/"},
		{"/a//../b", "/b"}, // slashes merged first, as a merging upstream reads it
		{"//x", "/x"},
		{"/a///b//", "/a/b/"},
		{"//..//x", "/x"},
		{"/a/.../b", "/a/.../b"}, // not a dot segment
		{"/a/..b/.c/", "/a/..b/.c/"},
		{"/a\\b", "/a\\b"}, // a backslash alone is an ordinary character
		{"*", "*"},
		{"", ""},
	} {
		got, err := NormalizePath(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for in, want := range map[string]error{
		"/a\r\nX-Evil: 1":     ErrPathControl,
		"/a\x00":              ErrPathControl,
		"/a\x7f":              ErrPathControl,
		"/public\\..\\secret": ErrPathBackslash,
		"/public/..\\secret":  ErrPathBackslash,
		"/public\\.":          ErrPathBackslash,
	} {
		if _, err := NormalizePath(in); !errors.Is(err, want) {
			t.Errorf("NormalizePath(%q): %v, want %v", in, err, want)
		}
	}
}

// The router normalizes the decoded path: the encodings clients use to
// smuggle dot segments all decode to one.
func TestNormalizePathDecoded(t *testing.T) {
	for _, raw := range []string{
		"/public/../private/secret",
		"/public/%2e%2e/private/secret",
		"/public/%2E%2E/private/secret",
		"/public/..%2Fprivate/secret",
		"/public%2F..%2Fprivate%2Fsecret",
		"/public/.%2e/private/./secret",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := NormalizePath(u.Path)
		if err != nil || got != "/private/secret" {
			t.Errorf("%s: %q %v", raw, got, err)
		}
	}
}

// matchTable is the table of FuzzMatch: open and protected prefixes, a
// strip_path route and a regex.
func matchTable(t testing.TB) *Table {
	tbl, err := NewTable([]Route{
		{ID: 1, Paths: []string{"/public"}},
		{ID: 2, Paths: []string{"/private"}},
		{ID: 3, Paths: []string{"/api"}, StripPath: true},
		{ID: 4, Paths: []string{`~/v[0-9]+/items`}, Hosts: []string{"*.example.com"}},
		{ID: 5, Paths: []string{"/"}, Methods: []string{"POST"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// FuzzMatch runs arbitrary paths through what the router does with them:
// normalization, matching and strip_path. It must never panic; a
// normalized path has no dot segment and normalizes to itself; the matched
// portion is a prefix of the normalized path; the upstream path starts
// with "/" and has no dot segment either.
func FuzzMatch(f *testing.F) {
	for _, s := range []string{
		"/", "/public/../private/secret", "/public/%2e%2e/private", "/api/../../etc",
		"/api/x/./y", "/v1/items/..", "/a//b", "/public\\..\\private", "*", "",
		"/\x00", "/api", "/api/", "/private/./../public", "/..", "/./.",
	} {
		f.Add(s, "a.example.com", "GET")
	}
	tbl := matchTable(f)
	f.Fuzz(func(t *testing.T, raw, host, method string) {
		path := raw
		if u, err := url.Parse(raw); err == nil {
			path = u.Path // decoded, as the server gives it
		}
		norm, err := NormalizePath(path)
		if err != nil {
			return
		}
		if strings.HasPrefix(norm, "/") && hasDotSegment(norm, "/") {
			t.Fatalf("NormalizePath(%q) = %q has a dot segment", path, norm)
		}
		again, err := NormalizePath(norm)
		if err != nil || again != norm {
			t.Fatalf("not idempotent: %q → %q → %q, %v", path, norm, again, err)
		}
		m := tbl.Match(Request{Host: host, Path: norm, Method: method})
		if m.Route == nil {
			_ = tbl.Explain(Request{Host: host, Path: norm, Method: method})
			return
		}
		if !strings.HasPrefix(norm, m.MatchedPath) {
			t.Fatalf("matched %q is not a prefix of %q", m.MatchedPath, norm)
		}
		up := UpstreamPath(m.Route, m.MatchedPath, norm)
		if !strings.HasPrefix(up, "/") || hasDotSegment(up, "/") {
			t.Fatalf("upstream path %q of %q (route %d)", up, norm, m.Route.ID)
		}
	})
}
