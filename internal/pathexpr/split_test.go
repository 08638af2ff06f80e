package pathexpr

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// TestSplitAndRequired checks Split and Required against the plain
// anchored expression on many paths: splitting must never change which
// paths match or how much of them, and a path without the required
// literal must never match.
func TestSplitAndRequired(t *testing.T) {
	exprs := []string{
		`/r1/[0-9]+/items`, `/api/(v1|v2)/users`, `/a(?i)bc`, `(?i)/abc`, `/x\b`, `/x^`, `/x(?m)^y`,
		`/[a-z]+/legacy`, `/users/[0-9]+$`, `/a.*b`, `/a(b)c(d)`, `/ab*?c`, `/(?P<id>[0-9]+)/x`,
		`/a|/b`, `/static/.*\.css`, `/a\pL+`, `/é[0-9]`, `/a\x{FFFD}b`, `/a`, `/a/`, `/\Q.*\E[0-9]`,
		`/v[0-9]{2,3}/x`, `/a(?:b|bc)`, `/a(?U)b+`, `/a(b|)c`, `/ab\B`,
	}
	wantSplit := map[string]string{ // head of the expressions that must split
		`/r1/[0-9]+/items`: "/r1/", `/api/(v1|v2)/users`: "/api/", `/[a-z]+/legacy`: "/",
		`/users/[0-9]+$`: "/users/", `/static/.*\.css`: "/static/",
	}
	wantNoSplit := []string{`(?i)/abc`, `/x\b`, `/x^`, `/x(?m)^y`, `/a\x{FFFD}b`, `/ab\B`}
	wantRequired := map[string]string{`/[a-z]+/legacy`: "/legacy", `/static/.*\.css`: ".css", `/a.*b`: "b", `(?i)/abc`: ""}
	alphabet := []string{"/", "a", "b", "c", "d", "x", "y", "r1", "1", "23", "api", "v1", "v2", "users", "items", "legacy", "é", "\xff", "\n", ".css", "L", "static"}
	rng := rand.New(rand.NewSource(5))
	var paths []string
	for range 4000 {
		var b strings.Builder
		b.WriteString("/")
		for range rng.Intn(7) {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		paths = append(paths, b.String())
	}
	paths = append(paths, "/r1/12/items", "/api/v2/users/9", "/abc", "/users/7", "/static/x/y.css", "/ab", "/abbbc", "/a\xffb",
		"/x", "/x/", "/xy", "/x\ny", "/abc/legacy", "/abcd", "/12/x", "/é5", "/.*7", "/v123/x", "/v12/x/y", "/abx")
	for _, expr := range exprs {
		full := regexp.MustCompile("^(?:" + expr + ")")
		head, rest, ok := Split(expr)
		if h, want := wantSplit[expr]; want && (!ok || head != h) {
			t.Errorf("Split(%q) = %q, %q, %v; want head %q", expr, head, rest, ok, h)
		}
		for _, e := range wantNoSplit {
			if e == expr && ok {
				t.Errorf("Split(%q) = %q, %q: must not split", expr, head, rest)
			}
		}
		need := Required(expr)
		if want, ok := wantRequired[expr]; ok && need != want {
			t.Errorf("Required(%q) = %q, want %q", expr, need, want)
		}
		var restRe *regexp.Regexp
		if ok {
			restRe = regexp.MustCompile("^(?:" + rest + ")")
		}
		matched := 0
		for _, p := range paths {
			loc := full.FindStringIndex(p)
			if loc != nil {
				matched++
				if !strings.Contains(p, need) {
					t.Errorf("%q matches %q, which lacks the required %q", expr, p, need)
				}
			}
			if !ok {
				continue
			}
			var got []int
			if strings.HasPrefix(p, head) {
				if l := restRe.FindStringIndex(p[len(head):]); l != nil {
					got = []int{0, len(head) + l[1]}
				}
			}
			if (loc == nil) != (got == nil) || loc != nil && loc[1] != got[1] {
				t.Errorf("%q on %q: whole %v, split (%q + %q) %v", expr, p, loc, head, rest, got)
			}
		}
		if matched == 0 && expr != `/x^` && expr != `/x(?m)^y` { // those two match nothing at all
			t.Errorf("%q matched none of the paths: the test proves nothing for it", expr)
		}
	}
}
