package tests

import (
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

// TestRegexProgramBounded: an editor's regular expression (a route path,
// a response-body-transform pattern) is refused when its program would
// exceed regexsize.MaxProgram instructions. Counted repetitions multiply:
// 4,090 characters of ".{1000}" compiled to ~585,000 instructions, a
// fifth of a second and ~25 MB per compilation, kept while the route
// lives, so one route with 100 such paths cost minutes of CPU and GBs.
func TestRegexProgramBounded(t *testing.T) {
	g, sid := echoGateway(t)
	big := "/" + strings.Repeat(".{1000}", 11) // 11,000 instructions
	st, body := g.Do("POST", "/api/v1/routes", map[string]any{"name": "big", "service_id": sid, "paths": []string{"/ok", "~" + big}})
	if st != 400 || !strings.Contains(string(body), "paths[1]") || !strings.Contains(string(body), "too large") {
		t.Fatalf("route with a huge regex: %d %s", st, body)
	}
	// a counted repetition within the bound still routes
	g.Route("r", sid, testgw.Paths("~/a{1,1000}b"))
	if p := send(t, g, "GET", "/aaab", nil); p.Status != 200 {
		t.Fatalf("proxied: %d %s", p.Status, p.Body)
	}
	st, body = g.Do("POST", "/api/v1/plugins", map[string]any{"type": "response-body-transform", "scope": "global",
		"config": map[string]any{"replace": []any{map[string]any{"pattern": big, "with": "x"}}}})
	if st != 400 || !strings.Contains(string(body), "config.replace[0].pattern") || !strings.Contains(string(body), "too large") {
		t.Fatalf("body transform with a huge pattern: %d %s", st, body)
	}
}
