package traffic

// Test helpers of the traffic plugins: startGW runs the shared harness
// (plugintest) with handlers given as JSON.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// The in-process Caddy of these tests is plugintest's.
func TestMain(m *testing.M) { plugintest.Main(m) }

// startGW loads a Caddy config whose route runs handlers (each the JSON of
// a handler object, e.g. `{"handler":"gateway_cors"}`) then reverse_proxy.
func startGW(t *testing.T, handlers []string, opts ...plugintest.Option) *plugintest.Gateway {
	t.Helper()
	hs := make([]any, len(handlers))
	for i, h := range handlers {
		hs[i] = json.RawMessage(h)
	}
	return plugintest.Start(t, hs, opts...)
}

// testInfo is a handler standing in for the gateway router in tests: it
// attaches a gwctx.Info with the router's decisions.
type testInfo struct {
	HTTPSPort int    `json:"https_port,omitempty"`
	ClientIP  string `json:"client_ip,omitempty"`
}

func init() { caddy.RegisterModule(testInfo{}) }

func (testInfo) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.test_gwinfo", New: func() caddy.Module { return new(testInfo) }}
}

func (h testInfo) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info, r := gwctx.Ensure(r)
	info.HTTPSPort = h.HTTPSPort
	info.ClientIP = h.ClientIP
	return next.ServeHTTP(w, r)
}

// caddyLoadErr loads a config whose route has the handler JSON h and returns
// caddy.Load's error.
func caddyLoadErr(t *testing.T, h string) error {
	t.Helper()
	cfg := fmt.Sprintf(`{"admin":{"disabled":true},"logging":{"logs":{"default":{"writer":{"output":"discard"}}}},
		"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:%d"],"routes":[{"handle":[%s]}]}}}}}`, plugintest.FreePort(t), h)
	err := caddy.Load([]byte(cfg), true)
	if err == nil {
		_ = caddy.Stop()
	}
	return err
}
