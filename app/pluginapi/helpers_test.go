package pluginapi_test

import (
	"fmt"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
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

// answer is one proxied answer (testgw.Proxy reads it).
type answer testgw.Answer

// proxy sends a proxied request with headers given as name, value pairs.
func proxy(t *testing.T, g *testgw.Gateway, method, path string, hdr ...string) answer {
	t.Helper()
	return answer(g.Proxy(t, method, path, nil, hdr...))
}

func (a answer) echo(t *testing.T) testgw.Echoed {
	t.Helper()
	return testgw.DecodeEcho(t, a.Body)
}

func id(v map[string]any) int64 { return testgw.ID(v) }

func p(format string, args ...any) string { return fmt.Sprintf(format, args...) }
