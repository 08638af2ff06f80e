package traffic

// Test helpers of the traffic plugins: startGW runs the shared harness
// (plugintest) with handlers given as JSON, and config checks.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/modules/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
	"github.com/caddy-gateway/gateway/schema"
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

// ---- config checks ----

// normalized decodes raw into a fresh config of the plugin type (as the
// admin API does) and returns the marshaled result as a map.
func normalized(t *testing.T, typeName, raw string) (map[string]any, error) {
	t.Helper()
	out, err := plugins.NormalizeConfig(typeName, json.RawMessage(raw))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

// wantDefaults checks that the config raw normalizes to exactly want (JSON).
func wantDefaults(t *testing.T, typeName, raw, want string) {
	t.Helper()
	got, err := normalized(t, typeName, raw)
	if err != nil {
		t.Fatalf("%s %s: %v", typeName, raw, err)
	}
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON: %v", err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("%s %s normalized to\n %s\nwant\n %s", typeName, raw, gb, wb)
	}
}

// wantConfigErrors checks that each raw config (key) is refused with an
// error naming the field (value: the expected FieldError field, "config."
// prefixed as the admin API shows it).
func wantConfigErrors(t *testing.T, typeName string, cases map[string]string) {
	t.Helper()
	for raw, field := range cases {
		_, err := normalized(t, typeName, raw)
		if err == nil {
			t.Errorf("%s %s: no error, want one naming %s", typeName, raw, field)
			continue
		}
		fe, ok := err.(*schema.FieldError)
		if !ok || fe.Field != field {
			t.Errorf("%s %s: error %q, want one naming %s", typeName, raw, err, field)
		}
	}
}

// handlerJSON is the Caddy handler JSON of a plugin instance with the
// normalized config raw (what the gateway's compiler emits).
func handlerJSON(t *testing.T, typeName, raw string) string {
	t.Helper()
	cfg, err := plugins.NormalizeConfig(typeName, json.RawMessage(raw))
	if err != nil {
		t.Fatalf("%s %s: %v", typeName, raw, err)
	}
	out, err := plugins.HandlerJSON(typeName, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// adaptCaddyfile adapts a Caddyfile site body (the directives inside a site
// block) and returns the handler objects of the result in order.
func adaptCaddyfile(t *testing.T, body string) ([]map[string]any, error) {
	t.Helper()
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("http://127.0.0.1:0 {\n"+body+"\n}\n"), nil)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	var hs []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["handler"].(string); ok {
				hs = append(hs, v)
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return hs, nil
}

// wantCaddyfile adapts body and checks that its handler named handler equals
// want (JSON, with the "handler" key).
func wantCaddyfile(t *testing.T, body, want string) {
	t.Helper()
	hs, err := adaptCaddyfile(t, body)
	if err != nil {
		t.Fatalf("adapting %q: %v", body, err)
	}
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON: %v", err)
	}
	wb, _ := json.Marshal(w)
	for _, h := range hs {
		if h["handler"] == w["handler"] {
			gb, _ := json.Marshal(h)
			if !bytes.Equal(gb, wb) {
				t.Fatalf("Caddyfile %q gave\n %s\nwant\n %s", body, gb, wb)
			}
			return
		}
	}
	t.Fatalf("Caddyfile %q: no handler %v in %v", body, w["handler"], hs)
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
