package plugins_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-gateway/gateway/modules/plugins"
	_ "github.com/caddy-gateway/gateway/modules/plugins/auth"
	_ "github.com/caddy-gateway/gateway/modules/plugins/httplog"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
	_ "github.com/caddy-gateway/gateway/modules/plugins/opentelemetry"
	_ "github.com/caddy-gateway/gateway/modules/plugins/proxycache"
	_ "github.com/caddy-gateway/gateway/modules/plugins/ratelimit"
	_ "github.com/caddy-gateway/gateway/modules/plugins/traffic"
	_ "github.com/caddy-gateway/gateway/modules/plugins/wasm"
	"github.com/caddy-gateway/gateway/schema"
)

// Caddy's own instances of every plugin module start from the type's
// defaults, so plain Caddy JSON that leaves fields out means the same as
// the admin API: what NormalizeConfig fills in for {} is what a bare
// module holds.
func TestCaddyInstancesStartFromDefaults(t *testing.T) {
	types := plugins.Types()
	if len(types) < 18 {
		t.Fatalf("only %d plugin types registered", len(types))
	}
	for _, typ := range types {
		info, err := caddy.GetModule("http.handlers." + typ.ModuleName())
		if err != nil {
			t.Fatalf("%s: %v", typ.Name, err)
		}
		bare, _ := json.Marshal(info.New())
		var got, want map[string]any
		_ = json.Unmarshal(bare, &got)
		norm, err := plugins.NormalizeConfig(typ.Name, json.RawMessage(`{}`))
		if err != nil {
			continue // a type with required fields (rate-limit's limit, http-log's endpoint)
		}
		_ = json.Unmarshal(norm, &want)
		for k, v := range want {
			gb, _ := json.Marshal(got[k])
			wb, _ := json.Marshal(v)
			if string(gb) != string(wb) {
				t.Errorf("%s.%s: Caddy instance %s, API default %s", typ.Name, k, gb, wb)
			}
		}
	}
}

// Plain Caddy JSON is held to the admin API's rules: a value out of a
// declared bound is refused when Caddy provisions the module, with the
// message the API gives (less the API's "config." prefix). Every integer
// field of every registered type, below its minimum and above its maximum.
func TestProvisionRefusesWhatTheAPIRefuses(t *testing.T) {
	checked := 0
	for _, typ := range plugins.Types() {
		s := schema.JSONSchema(typ.New(), schema.Input)
		props := s["properties"].(map[string]any)
		base := map[string]any{}
		req, _ := s["required"].([]string)
		for _, name := range req { // any value of the right type: bounds are checked before Validate
			if p := props[name].(map[string]any); p["type"] == "integer" {
				base[name] = 1
			} else {
				base[name] = "x"
			}
		}
		for name, p := range props {
			p := p.(map[string]any)
			if p["type"] != "integer" {
				continue
			}
			for _, bound := range []string{"minimum", "maximum"} {
				b, ok := p[bound].(int64)
				if !ok {
					if f, isF := p[bound].(float64); isF {
						b, ok = int64(f), true
					}
				}
				if !ok || b <= math.MinInt32 || b >= math.MaxInt32 {
					continue
				}
				cfg := maps.Clone(base)
				if bound == "minimum" {
					cfg[name] = b - 1
				} else {
					cfg[name] = b + 1
				}
				raw, _ := json.Marshal(cfg)
				_, apiErr := plugins.NormalizeConfig(typ.Name, raw)
				if apiErr == nil {
					t.Errorf("%s %s: the API accepted it", typ.Name, raw)
					continue
				}
				cfg["handler"] = typ.ModuleName()
				err := caddy.Validate(&caddy.Config{AppsRaw: caddy.ModuleMap{"http": mustJSON(t, map[string]any{
					"servers": map[string]any{"s": map[string]any{"listen": []string{"127.0.0.1:0"},
						"routes": []any{map[string]any{"handle": []any{cfg}}}}}})}})
				want := strings.TrimPrefix(apiErr.Error(), "config.")
				if err == nil || !strings.HasSuffix(err.Error(), ": "+want) {
					t.Errorf("%s %s: provision error %v, want one ending in %q", typ.Name, raw, err, want)
				}
				checked++
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d bounds checked", checked)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every registered type is a Caddyfile directive, and a Caddyfile runs the
// directives in the gateway's default ordering (Outer types first) whatever
// order they are written in: the directive order comes from the registry.
func TestCaddyfileDirectivesFollowTheOrdering(t *testing.T) {
	args := map[string]string{ // types that need a setting
		"ip-restriction": "{\n deny 10.0.0.1\n}",
		"redirect":       "{\n to_https\n}",
		"rate-limit":     "5",
		"http-log":       "http://127.0.0.1:9",
		"opentelemetry":  "http://127.0.0.1:9/v1/traces",
		"wasm":           "{\n module m\n}",
		"acl":            "{\n allow g\n}",
		"openid-connect": "https://id.example.com {\n client_id api\n bearer_only\n}",
	}
	types := plugins.Types()
	slices.SortStableFunc(types, func(a, b plugins.Type) int {
		if a.Outer != b.Outer {
			if a.Outer {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Ordering, b.Ordering)
	})
	var lines, want []string
	for _, typ := range types {
		lines = append([]string{typ.ModuleName() + " " + args[typ.Name]}, lines...) // reversed
		want = append(want, typ.ModuleName())
	}
	body := strings.Join(lines, "\n") + "\nreverse_proxy 127.0.0.1:9"
	hs, err := plugintest.AdaptCaddyfile(t, body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	var got []string
	for _, h := range hs {
		if name := h["handler"].(string); strings.HasPrefix(name, "gateway_") {
			got = append(got, name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Caddyfile handler order\n %v\nwant (ordering)\n %v", got, want)
	}
}

// A type without a default ordering is refused at registration, so it
// cannot go without a place in the chain and in the Caddyfile.
func TestRegisterRefusesATypeWithoutOrdering(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "no default ordering") {
			t.Fatalf("recovered %v", r)
		}
	}()
	plugins.Register(plugins.Type{Name: "no-ordering", New: func() plugins.Plugin { return nil }})
}

// TestStoredConfigGetsTodaysDefaults: a config stored before some of its
// type's fields existed (here a rate-limit written before policy,
// fault_tolerant and ipv6_prefix_length) reaches Caddy with their
// defaults and provisions, instead of failing the whole load on a zero
// value the rules refuse.
func TestStoredConfigGetsTodaysDefaults(t *testing.T) {
	raw, err := plugins.HandlerJSON("rate-limit", json.RawMessage(`{"limit":1,"window_s":60,"key":"ip","header_name":""}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m["policy"] != "local" || m["fault_tolerant"] != true || m["ipv6_prefix_length"] != float64(64) || m["limit"] != float64(1) {
		t.Fatalf("handler JSON %s: want the stored limit and today's defaults", raw)
	}
	err = caddy.Validate(&caddy.Config{AppsRaw: caddy.ModuleMap{"http": mustJSON(t, map[string]any{
		"servers": map[string]any{"s": map[string]any{"listen": []string{"127.0.0.1:0"},
			"routes": []any{map[string]any{"handle": []any{json.RawMessage(raw)}}}}}})}})
	if err != nil {
		t.Fatalf("provisioning %s: %v", raw, err)
	}
}
