package pluginapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
	"github.com/caddy-gateway/gateway/modules/plugins"
)

// start runs a gateway. Its plugins' process-wide state (rate-limit
// counters, cache entries, keyed by plugin id, which a new store hands out
// again from 1) starts fresh: the previous gateway's instances released
// theirs when it stopped.
func start(t *testing.T) *testgw.Gateway {
	t.Helper()
	return testgw.Start(t, nil)
}

// need skips a test when a plugin type is not registered (yet).
func need(t *testing.T, types ...string) {
	t.Helper()
	for _, name := range types {
		if _, ok := plugins.Lookup(name); !ok {
			t.Skipf("plugin type %s is not registered", name)
		}
	}
}

// echo is an upstream answering what it received.
func echo(t *testing.T) (addr string) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "query": r.URL.RawQuery, "headers": r.Header})
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

type echoed struct {
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Headers http.Header `json:"headers"`
}

// answer is one proxied answer (testgw.Proxy reads it).
type answer testgw.Answer

// proxy sends a proxied request with headers given as name, value pairs.
func proxy(t *testing.T, g *testgw.Gateway, method, path string, hdr ...string) answer {
	t.Helper()
	return answer(g.Proxy(t, method, path, nil, hdr...))
}

func (a answer) echo(t *testing.T) echoed {
	t.Helper()
	var e echoed
	if err := json.Unmarshal([]byte(a.Body), &e); err != nil {
		t.Fatalf("not an upstream answer (status %d): %q", a.Status, a.Body)
	}
	return e
}

func id(v map[string]any) int64 { return testgw.ID(v) }

func p(format string, args ...any) string { return fmt.Sprintf(format, args...) }
