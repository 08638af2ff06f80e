package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/storage"
)

// A store written before some of today's rules loads after an upgrade:
// the numbers above today's maxima (a plugin config's, a service's, a
// target's) are lowered to them at start, and placeholders plugin values
// may no longer use are made literal. Before, one hsts or cors max_age_s
// above its maximum, or a request-transform header with {env.…} (both
// accepted by the API of early versions), kept the whole stored
// configuration from loading, the proxy served nothing, and every change
// was refused while a second such plugin remained; the store's own export
// did not import.
func TestUpgradedStoreAboveMaxima(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("r", sid, map[string]any{"paths": []string{"/r"}})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "hsts", "scope": "route", "route_id": rid})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "cors", "scope": "route", "route_id": rid,
		"config": map[string]any{"allow_origins": []string{"*"}}})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-transform", "scope": "route", "route_id": rid,
		"config": map[string]any{"set_headers": map[string]string{"X-Env": "x"}}})
	// What an older version stored.
	g = restartUpgraded(t, g,
		stored(`UPDATE plugins SET config = '{"max_age_s":999999999999,"include_subdomains":false,"preload":false}' WHERE type = 'hsts'`),
		stored(`UPDATE plugins SET config = '{"allow_origins":["*"],"allow_methods":["GET","HEAD"],"allow_headers":[],"expose_headers":[],"allow_credentials":false,"max_age_s":999999999}' WHERE type = 'cors'`),
		stored(`UPDATE plugins SET config = replace(config, '"X-Env":"x"', '"X-Env":"Bearer {env.HOME}"') WHERE type = 'request-transform'`),
		stored(`UPDATE services SET connect_timeout_ms = 7200000, retries = 1000`),
		stored(`UPDATE targets SET weight = 100000`))
	a := g.Proxy(t, "GET", "/r", nil)
	if a.Status != 200 {
		t.Fatalf("after the upgrade: %d %s", a.Status, a.Body)
	}
	if got := testgw.DecodeEcho(t, a.Body).Headers.Get("X-Env"); got != "Bearer {env.HOME}" {
		t.Errorf("X-Env %q", got)
	}
	a = g.Proxy(t, "OPTIONS", "/r", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "GET")
	if got := a.Header.Get("Access-Control-Max-Age"); got != "86400" {
		t.Errorf("preflight max-age %q", got)
	}
	for _, p := range g.List("/api/v1/plugins") {
		b, _ := json.Marshal(p["config"])
		want := map[any]string{"hsts": `"max_age_s":315360000`, "cors": `"max_age_s":86400`,
			"request-transform": `"X-Env":"Bearer \\{env.HOME\\}"`}[p["type"]]
		if !strings.Contains(string(b), want) {
			t.Errorf("%s config %s", p["type"], b)
		}
	}
	svc := g.Must("GET", "/api/v1/services/"+itoa(sid), nil)
	if svc["connect_timeout_ms"] != float64(3600000) || svc["retries"] != float64(100) {
		t.Errorf("service %v", svc)
	}
	// The store's export imports, and changes go live.
	var doc map[string]any
	if code := g.JSON("GET", "/api/v1/export?include_secrets=true", nil, &doc); code != 200 {
		t.Fatal(code)
	}
	g.Must("POST", "/api/v1/import", doc)
	g.Route("r2", int64(g.List("/api/v1/services")[0]["id"].(float64)), map[string]any{"paths": []string{"/r2"}})
	if a := g.Proxy(t, "GET", "/r2", nil); a.Status != 200 {
		t.Fatalf("a new route: %d", a.Status)
	}
}

// TestUpgradedStoreWithALargeRouteRegex: a route regular expression over
// today's size bound (regexsize.MaxProgram), stored before the bound
// existed, still loads and routes after an upgrade (leaving the route out
// would send its traffic to a less specific route, without its plugins);
// the API refuses such an expression in a change.
func TestUpgradedStoreWithALargeRouteRegex(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("big", sid, map[string]any{"paths": []string{"~/a"}})
	big := "~/a" + strings.Repeat("b{0,1000}", 11) // over 11,000 instructions
	paths, _ := json.Marshal([]string{big})
	g = restartUpgraded(t, g, stored("UPDATE routes SET paths = ? WHERE id = ?", string(paths), rid))
	if a := g.Proxy(t, "GET", "/abb", nil); a.Status != 200 {
		t.Fatalf("a stored route over the regex bound after the upgrade: %d %s", a.Status, a.Body)
	}
	g.WantError(400, "PUT", "/api/v1/routes/"+itoa(rid), map[string]any{"name": "big", "service_id": sid, "paths": []string{big}}, "paths[0]", "too large")
	g.Route("other", sid, map[string]any{"paths": []string{"/other"}}) // other changes go live
	if a := g.Proxy(t, "GET", "/other", nil); a.Status != 200 {
		t.Fatalf("a new route: %d", a.Status)
	}
}

// TestUpgradedStoreWithALargeBodyPattern: a response-body-transform
// pattern over the size bound, stored before the bound existed, loads
// and applies after an upgrade (refusing it at load kept the whole stored
// configuration from loading); the API refuses it in a change.
func TestUpgradedStoreWithALargeBodyPattern(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("r", sid, map[string]any{"paths": []string{"/r"}})
	plugin := func(pattern string) map[string]any {
		return map[string]any{"type": "response-body-transform", "scope": "route", "route_id": rid,
			"config": map[string]any{"replace": []any{map[string]any{"pattern": pattern, "with": "X"}}}}
	}
	pid := testgw.ID(g.Must("POST", "/api/v1/plugins", plugin(`"name":"up"`)))
	transformed := func(when string) {
		t.Helper()
		if a := g.Proxy(t, "GET", "/r", nil); a.Status != 200 || strings.Contains(a.Body, `"name":"up"`) || !strings.HasPrefix(a.Body, "{X,") {
			t.Fatalf("%s: %d %.300s", when, a.Status, a.Body)
		}
	}
	transformed("before the upgrade")
	big := `"name":"u` + strings.Repeat("p{0,1000}", 11) + `"` // over 11,000 instructions
	cfg, _ := json.Marshal(map[string]any{"replace": []any{map[string]any{"pattern": big, "with": "X"}}})
	g = restartUpgraded(t, g, stored("UPDATE plugins SET config = ? WHERE id = ?", string(cfg), pid))
	transformed("a stored body pattern over the bound, after the upgrade")
	g.WantError(400, "PUT", "/api/v1/plugins/"+itoa(pid), plugin(big), "config.replace[0].pattern", "too large")
}

// TestWasmConfigBounded: a wasm plugin's free-form config is at most
// 1 MiB of JSON. It is carried by every compiled configuration, answer
// and export: one plugin with a 19 MiB config made every later change of
// an unrelated route cost 0.8 s and 300 MB. A larger config stored by an
// older version still loads and serves; its next change must be smaller.
func TestWasmConfigBounded(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("r", sid, map[string]any{"paths": []string{"/r"}})
	g.Must("POST", "/api/v1/wasm-modules", map[string]any{"name": "m", "wat": testgw.MinimalWAT})
	plugin := func(config string) map[string]any {
		return map[string]any{"type": "wasm", "scope": "route", "route_id": rid, "config": map[string]any{"module": "m", "config": config}}
	}
	big := strings.Repeat("a", 1<<20)
	g.WantError(400, "POST", "/api/v1/plugins", plugin(big), "config.config: must be at most 1048576 bytes")
	pid := testgw.ID(g.Must("POST", "/api/v1/plugins", plugin("small")))

	// An older version stored a larger one.
	cfg, _ := json.Marshal(map[string]any{"module": "m", "config": big})
	g = restartUpgraded(t, g, stored("UPDATE plugins SET config = ? WHERE id = ?", string(cfg), pid))
	if a := g.Proxy(t, "GET", "/r", nil); a.Status != 200 {
		t.Fatalf("a stored wasm config over the bound after the upgrade: %d %s", a.Status, a.Body)
	}
	g.WantError(400, "PUT", "/api/v1/plugins/"+itoa(pid), plugin(big), "config.config")
	g.Must("PUT", "/api/v1/plugins/"+itoa(pid), plugin("small again"))
}

// restartUpgraded stops g, writes into its store what an older version
// stored, and starts a gateway on that store: an upgrade.
func restartUpgraded(t *testing.T, g *testgw.Gateway, writes ...sqlWrite) *testgw.Gateway {
	t.Helper()
	if err := stopGateway(); err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open("sqlite", g.DSN)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range writes {
		if err := st.DB.Exec(w.sql, w.args...).Error; err != nil {
			t.Fatal(w.sql, err)
		}
	}
	st.Close()
	return testgw.Start(t, &testgw.Options{DSN: g.DSN})
}

// sqlWrite is a statement and its arguments.
type sqlWrite struct {
	sql  string
	args []any
}

func stored(sql string, args ...any) sqlWrite { return sqlWrite{sql, args} }
