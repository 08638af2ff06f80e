package pluginapi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/modules/plugins"
)

func TestPluginCRUD(t *testing.T) {
	need(t, "rate-limit", "request-id", "cors", "key-auth")
	g := start(t)
	svc := g.Service("svc", "127.0.0.1:9")
	route := g.Route("r", svc, map[string]any{"paths": []string{"/r"}})

	// Create: defaults filled in the config, ordering from the type, enabled true.
	rl := g.Must("POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "global", "config": map[string]any{"limit": 5}})
	wantCfg := map[string]any{"limit": 5.0, "window_s": 60.0, "key": "ip", "header_name": "", "ipv6_prefix_length": 64.0, "policy": "local", "sync_interval_ms": 0.0, "fault_tolerant": true}
	if !reflect.DeepEqual(rl["config"], wantCfg) {
		t.Fatalf("config = %v, want %v", rl["config"], wantCfg)
	}
	if rl["ordering"] != 700.0 || rl["enabled"] != true || rl["scope"] != "global" || rl["service_id"] != nil || rl["route_id"] != nil {
		t.Fatalf("created: %v", rl)
	}
	for _, k := range []string{"id", "type", "created_at", "updated_at"} {
		if _, ok := rl[k]; !ok {
			t.Fatalf("answer lacks %s: %v", k, rl)
		}
	}
	rlID := id(rl)
	if got := g.Must("GET", p("/api/v1/plugins/%d", rlID), nil); !reflect.DeepEqual(got, rl) {
		t.Fatalf("GET = %v, want %v", got, rl)
	}

	// A config left out entirely gets every default.
	reqID := g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-id", "scope": "service", "service_id": svc})
	cfg, _ := reqID["config"].(map[string]any)
	if cfg["header_name"] != "X-Request-ID" || reqID["ordering"] != 100.0 || reqID["service_id"] != float64(svc) {
		t.Fatalf("request-id: %v", reqID)
	}
	cors := g.Must("POST", "/api/v1/plugins", map[string]any{"type": "cors", "scope": "route", "route_id": route, "ordering": 100, "enabled": false})
	if cors["enabled"] != false || cors["route_id"] != float64(route) {
		t.Fatalf("cors: %v", cors)
	}
	early := g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "global", "ordering": -5})

	// List: ordering, then id.
	var order []int64
	for _, pl := range g.List("/api/v1/plugins") {
		order = append(order, id(pl))
	}
	if want := []int64{id(early), id(reqID), id(cors), rlID}; !reflect.DeepEqual(order, want) {
		t.Fatalf("list order %v, want %v", order, want)
	}

	// Validation errors name the field.
	for _, c := range []struct {
		body      map[string]any
		fragments []string
	}{
		{map[string]any{"type": "rate-limit", "scope": "route", "route_id": route, "config": map[string]any{}}, []string{"config.limit", "required"}},
		{map[string]any{"type": "rate-limit", "scope": "route", "route_id": route, "config": map[string]any{"limit": 1, "bogus": true}}, []string{"config.bogus", "unknown field"}},
		{map[string]any{"type": "rate-limit", "scope": "route", "route_id": route, "config": map[string]any{"limit": 0}}, []string{"config.limit"}},
		{map[string]any{"type": "rate-limit", "scope": "route", "route_id": route, "config": map[string]any{"limit": 1, "key": "moon"}}, []string{"config.key"}},
		{map[string]any{"type": "rate-limit", "scope": "route", "route_id": route, "config": "x"}, []string{"config"}},
		{map[string]any{"type": "wasm", "scope": "global", "config": map[string]any{"module": "m"}}, []string{"module", `"m"`}},
		{map[string]any{"type": "wasm", "scope": "global", "config": map[string]any{"module": "m", "module_file": "/etc/passwd"}}, []string{"config.module_file", "unknown field"}},
		{map[string]any{"type": "nope", "scope": "global"}, []string{"type"}},
		{map[string]any{"scope": "global"}, []string{"type", "required"}},
		{map[string]any{"type": "cors"}, []string{"scope", "required"}},
		{map[string]any{"type": "cors", "scope": "galaxy"}, []string{"scope"}},
		{map[string]any{"type": "cors", "scope": "service"}, []string{"service_id", "required"}},
		{map[string]any{"type": "cors", "scope": "route"}, []string{"route_id", "required"}},
		{map[string]any{"type": "cors", "scope": "global", "service_id": svc}, []string{"service_id", "null"}},
		{map[string]any{"type": "cors", "scope": "service", "service_id": svc, "route_id": route}, []string{"route_id", "null"}},
		{map[string]any{"type": "cors", "scope": "service", "service_id": 999}, []string{"service_id", "999", "does not exist"}},
		{map[string]any{"type": "cors", "scope": "route", "route_id": 999}, []string{"route_id", "999", "does not exist"}},
		{map[string]any{"type": "cors", "scope": "global", "ordering": nil}, []string{"ordering"}},
		{map[string]any{"type": "cors", "scope": "global", "enabled": "yes"}, []string{"enabled"}},
		{map[string]any{"type": "cors", "scope": "global", "extra": 1}, []string{"extra", "unknown field"}},
		// One plugin of a type per scope target.
		{map[string]any{"type": "rate-limit", "scope": "global", "config": map[string]any{"limit": 9}}, []string{"type", "already exists"}},
		{map[string]any{"type": "request-id", "scope": "service", "service_id": svc}, []string{"type", "already exists"}},
		{map[string]any{"type": "cors", "scope": "route", "route_id": route}, []string{"type", "already exists"}},
	} {
		g.WantError(400, "POST", "/api/v1/plugins", c.body, c.fragments...)
	}
	g.WantError(400, "POST", "/api/v1/plugins", `{"type":`, "malformed")

	// The same type at other targets is fine.
	svcRL := g.Must("POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "service", "service_id": svc, "config": map[string]any{"limit": 2}})
	routeRL := g.Must("POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "route", "route_id": route, "config": map[string]any{"limit": 3}})
	route2 := g.Route("r2", svc, map[string]any{"paths": []string{"/r2"}})
	other := g.Must("POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "route", "route_id": route2, "config": map[string]any{"limit": 4}})

	// PUT is a full replacement: ordering and config fields left out are
	// reset; the id, type and creation time stay.
	g.Must("PUT", p("/api/v1/plugins/%d", rlID), map[string]any{"type": "rate-limit", "scope": "global", "ordering": 1, "config": map[string]any{"limit": 7, "window_s": 10}})
	put := g.Must("PUT", p("/api/v1/plugins/%d", rlID), map[string]any{"type": "rate-limit", "scope": "global", "config": map[string]any{"limit": 8}})
	if put["ordering"] != 700.0 || put["created_at"] != rl["created_at"] || id(put) != rlID {
		t.Fatalf("PUT: %v", put)
	}
	if c := put["config"].(map[string]any); c["limit"] != 8.0 || c["window_s"] != 60.0 {
		t.Fatalf("PUT config: %v", c)
	}
	// PUT keeping its own target is fine; moving onto an occupied target is not.
	g.Must("PUT", p("/api/v1/plugins/%d", id(other)), map[string]any{"type": "rate-limit", "scope": "route", "route_id": route2, "config": map[string]any{"limit": 5}})
	g.WantError(400, "PUT", p("/api/v1/plugins/%d", id(other)), map[string]any{"type": "rate-limit", "scope": "route", "route_id": route, "config": map[string]any{"limit": 5}}, "type", "already exists")
	g.WantError(400, "PUT", p("/api/v1/plugins/%d", id(other)), map[string]any{"type": "rate-limit", "scope": "service", "service_id": svc, "config": map[string]any{"limit": 5}}, "already exists")
	g.WantError(400, "PUT", p("/api/v1/plugins/%d", id(other)), map[string]any{"type": "rate-limit", "scope": "global", "config": map[string]any{"limit": 5}}, "already exists")
	g.WantError(400, "PUT", p("/api/v1/plugins/%d", id(other)), map[string]any{"type": "rate-limit", "scope": "route", "route_id": route2, "config": map[string]any{}}, "config.limit")
	// Changing the type of a plugin is a full replacement too.
	moved := g.Must("PUT", p("/api/v1/plugins/%d", id(other)), map[string]any{"type": "request-id", "scope": "route", "route_id": route2})
	if moved["type"] != "request-id" || moved["ordering"] != 100.0 {
		t.Fatalf("type change: %v", moved)
	}

	// 404s.
	g.WantError(404, "GET", "/api/v1/plugins/999", nil)
	g.WantError(400, "GET", "/api/v1/plugins/abc", nil, "id")
	g.WantError(404, "PUT", "/api/v1/plugins/999", map[string]any{"type": "cors", "scope": "global"})
	g.WantError(404, "DELETE", "/api/v1/plugins/999", nil)

	// Delete.
	if got := g.Must("DELETE", p("/api/v1/plugins/%d", id(routeRL)), nil); !reflect.DeepEqual(got, map[string]any{"deleted": true}) {
		t.Fatalf("delete: %v", got)
	}
	g.WantError(404, "GET", p("/api/v1/plugins/%d", id(routeRL)), nil)
	// Its target is free again.
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "route", "route_id": route, "config": map[string]any{"limit": 3}})

	// Deleting the service removes its plugins and its routes' plugins.
	g.Must("DELETE", p("/api/v1/services/%d", svc), nil)
	for _, pl := range g.List("/api/v1/plugins") {
		if pl["scope"] != "global" {
			t.Fatalf("plugin left after its service went: %v", pl)
		}
	}
	_ = svcRL

	// The config counter follows.
	var cfgInfo struct{ Plugins int }
	g.JSON("GET", "/api/v1/config", nil, &cfgInfo)
	if cfgInfo.Plugins != 2 {
		t.Fatalf("config counts %d plugins, want 2", cfgInfo.Plugins)
	}
}

func TestEndpointRoles(t *testing.T) {
	start(t)
	want := map[string]api.Role{
		"GET /api/v1/plugins": api.RoleViewer, "POST /api/v1/plugins": api.RoleEditor,
		"GET /api/v1/plugins/{id}": api.RoleViewer, "PUT /api/v1/plugins/{id}": api.RoleEditor,
		"DELETE /api/v1/plugins/{id}": api.RoleEditor, "POST /api/v1/cache/purge": api.RoleEditor,
		"GET /api/v1/consumers": api.RoleViewer, "POST /api/v1/consumers": api.RoleEditor,
		"GET /api/v1/consumers/{id}": api.RoleViewer, "PUT /api/v1/consumers/{id}": api.RoleEditor,
		"DELETE /api/v1/consumers/{id}":                    api.RoleEditor,
		"GET /api/v1/consumers/{consumer_id}/credentials":  api.RoleViewer,
		"POST /api/v1/consumers/{consumer_id}/credentials": api.RoleEditor,
		"DELETE /api/v1/credentials/{id}":                  api.RoleEditor,
	}
	for _, ep := range controlplane.Current().Admin().(*api.API).Endpoints() {
		k := ep.Method + " " + ep.Path
		if r, ok := want[k]; ok {
			if ep.Role != r {
				t.Errorf("%s: role %s, want %s", k, ep.Role, r)
			}
			delete(want, k)
		}
	}
	if len(want) > 0 {
		t.Errorf("endpoints missing: %v", want)
	}
}

// TestEveryRegisteredType creates an instance of every registered type on
// one route: configs are normalized (the OpenAPI check validates each answer
// against its type's output schema) and all of them compile into the
// running proxy together.
func TestEveryRegisteredType(t *testing.T) {
	g := start(t)
	svc := g.Service("svc", "127.0.0.1:9")
	route := g.Route("r", svc, nil)
	minimal := map[string]map[string]any{
		"rate-limit":     {"limit": 1000},
		"ip-restriction": {"allow": []string{"127.0.0.1"}},
		"acl":            {"allow": []string{"g"}},
		"redirect":       {"location": "https://example.com"},
		"http-log":       {"endpoint": "http://127.0.0.1:9/"},
		"openid-connect": {"issuer": "https://id.example.com", "client_id": "api", "bearer_only": true},
		"opentelemetry":  {"endpoint": "http://127.0.0.1:9/v1/traces"},
	}
	var tested []string
	for _, ty := range plugins.Types() {
		if ty.Name == "wasm" {
			continue // needs an uploaded module: the wasm module tests cover it
		}
		body := map[string]any{"type": ty.Name, "scope": "route", "route_id": route}
		st, b := g.Do("POST", "/api/v1/plugins", body)
		if st == 400 {
			cfg, ok := minimal[ty.Name]
			if !ok {
				t.Fatalf("%s needs config: %s (add a minimal config to this test)", ty.Name, b)
			}
			if !strings.Contains(string(b), "config.") {
				t.Fatalf("%s: the error does not name the config field: %s", ty.Name, b)
			}
			body["config"] = cfg
			st, b = g.Do("POST", "/api/v1/plugins", body)
		}
		if st != 200 {
			t.Fatalf("%s: %d %s", ty.Name, st, b)
		}
		var pl map[string]any
		if err := json.Unmarshal(b, &pl); err != nil {
			t.Fatal(err)
		}
		if pl["ordering"] != float64(ty.Ordering) {
			t.Fatalf("%s: ordering %v, want %d", ty.Name, pl["ordering"], ty.Ordering)
		}
		if _, internal := pl["config"].(map[string]any)["instance_id"]; internal {
			t.Fatalf("%s: the answer shows the compiler's instance_id: %s", ty.Name, b)
		}
		tested = append(tested, ty.Name)
	}
	if l := g.List("/api/v1/plugins"); len(l) != len(tested) {
		t.Fatalf("listed %d plugins, created %d", len(l), len(tested))
	}
	t.Logf("registered types tested: %s", strings.Join(tested, ", "))
}
