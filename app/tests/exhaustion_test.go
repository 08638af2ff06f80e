package tests

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/memtest"
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

// postRaw sends body as it is (no copy in the test's client) and returns
// the status and the answer.
func postRaw(t *testing.T, g *testgw.Gateway, path string, body []byte) (int, string) {
	t.Helper()
	resp, err := g.Client.Post(g.AdminURL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHugeArraysRefusedBeforeDecoding: an array or an object of millions
// of tiny items in a request body is refused by its count before anything
// is decoded. A 20 MiB route with 5 million one-letter hosts allocated
// 1.5 GB (686 MB at once) and 3 s of CPU before "at most 100 items": its
// check unmarshalled every item into a json.RawMessage, then the decoder
// into a Go slice. Escaped strings (\u0061) cost another second of
// tokenizing; two million unknown fields a 250 MB map.
func TestHugeArraysRefusedBeforeDecoding(t *testing.T) {
	g, sid := echoGateway(t)
	fill := func(head, item, tail string) []byte {
		var b bytes.Buffer
		b.WriteString(head)
		for i := 0; b.Len() < 20<<20-100; i++ {
			if strings.Contains(item, "%d") {
				fmt.Fprintf(&b, item, i)
			} else {
				b.WriteString(item)
			}
		}
		b.WriteString(tail)
		return b.Bytes()
	}
	route := fmt.Sprintf(`{"name":"x","service_id":%d,`, sid)
	cases := []struct {
		name, path string
		body       []byte
		field      string
	}{
		{"hosts", "/api/v1/routes", fill(route+`"hosts":[`, `"a",`, `"a"]}`), "hosts: must have at most 100 items"},
		{"escaped hosts", "/api/v1/routes", fill(route+`"hosts":[`, `"\u0061",`, `"a"]}`), "hosts: must have at most 100 items"},
		{"splits", "/api/v1/routes", fill(route+`"splits":[`, `{},`, `{}]}`), "splits: must have at most 100 items"},
		{"plugin map", "/api/v1/plugins", fill(`{"type":"request-transform","scope":"global","config":{"set_headers":{`, `"h%d":"",`, `"z":""}}}`),
			"config.set_headers: must have at most 100 items"},
		{"unknown fields", "/api/v1/services", fill(`{`, `"k%d":0,`, `"name":"x"}`), "k0: unknown field"},
	}
	for _, c := range cases {
		runtime.GC()
		var st int
		var answer string
		n := memtest.Allocated(func() { st, answer = postRaw(t, g, c.path, c.body) })
		if st != 400 || !strings.Contains(answer, c.field) {
			t.Errorf("%s: %d %s, want 400 %q", c.name, st, answer, c.field)
		}
		// Reading the body is about twice its size; the decoding walk
		// made it 20 to 75 times.
		if n > 200<<20 {
			t.Errorf("%s: refusing a 20 MiB body allocated %d MB", c.name, n>>20)
		}
	}
}
