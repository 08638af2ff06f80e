package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

func wantError(t *testing.T, st int, body []byte, status int, contains string) {
	t.Helper()
	if st != status {
		t.Fatalf("status %d, want %d: %s", st, status, body)
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Fatalf("not an {error} body: %s", body)
	}
	if !strings.Contains(e.Error, contains) {
		t.Fatalf("error %q does not mention %q", e.Error, contains)
	}
}

func TestServiceDefaultsAndFullReplace(t *testing.T) {
	g := testgw.Start(t, nil)
	svc := g.Must("POST", "/api/v1/services", map[string]any{"name": "a", "tls_sni": "x.test", "health_path": "   "})
	want := map[string]any{
		"name": "a", "protocol": "http", "connect_timeout_ms": 5000.0, "read_timeout_ms": 60000.0,
		"write_timeout_ms": 60000.0, "retries": 1.0, "lb_algorithm": "round_robin", "tls_sni": "x.test", "health_path": nil,
	}
	for k, v := range want {
		if svc[k] != v {
			t.Errorf("%s = %v, want %v", k, svc[k], v)
		}
	}
	for _, k := range []string{"id", "created_at", "updated_at"} {
		if svc[k] == nil {
			t.Errorf("answer lacks %s", k)
		}
	}
	id := testgw.ID(svc)
	// PUT is a full replacement: omitted optional fields go back to defaults.
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", id), map[string]any{"name": "a", "retries": 5, "lb_algorithm": "weighted"})
	got := g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", id), map[string]any{"name": "b"})
	if got["retries"] != 1.0 || got["lb_algorithm"] != "round_robin" || got["tls_sni"] != nil || got["name"] != "b" {
		t.Fatalf("PUT did not reset omitted fields: %v", got)
	}
	if got["created_at"] != svc["created_at"] {
		t.Fatalf("created_at changed: %v → %v", svc["created_at"], got["created_at"])
	}
	if g.Must("GET", fmt.Sprintf("/api/v1/services/%d", id), nil)["name"] != "b" {
		t.Fatal("GET after PUT")
	}
}

func TestValidationErrorsNameTheField(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s")
	cases := []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "/api/v1/services", map[string]any{}, "name"},
		{"POST", "/api/v1/services", map[string]any{"name": ""}, "name"},
		{"POST", "/api/v1/services", map[string]any{"name": "x", "protocol": "ftp"}, "protocol"},
		{"POST", "/api/v1/services", map[string]any{"name": "x", "retries": -1}, "retries"},
		{"POST", "/api/v1/services", map[string]any{"name": "x", "connect_timeout_ms": "5"}, "connect_timeout_ms"},
		{"POST", "/api/v1/services", map[string]any{"name": "x", "colour": "red"}, "colour"},
		{"POST", "/api/v1/services", `{"name": "x"`, "malformed JSON"},
		{"POST", "/api/v1/services", `[1]`, "JSON object"},
		{"POST", fmt.Sprintf("/api/v1/services/%d/targets", sid), map[string]any{"host": "h"}, "port"},
		{"POST", fmt.Sprintf("/api/v1/services/%d/targets", sid), map[string]any{"host": "h", "port": 70000}, "port"},
		{"POST", fmt.Sprintf("/api/v1/services/%d/targets", sid), map[string]any{"host": "h", "port": 1, "weight": -1}, "weight"},
		{"POST", "/api/v1/services/999/targets", map[string]any{"host": "h", "port": 1}, "service_id"},
		{"POST", "/api/v1/routes", map[string]any{"name": "r"}, "service_id"},
		{"POST", "/api/v1/routes", map[string]any{"name": "r", "service_id": 999}, "service_id"},
		{"POST", "/api/v1/routes", map[string]any{"name": "r", "service_id": sid, "paths": []string{"~("}}, "paths[0]"},
		// Wrapped as ^(?:a)(b) this compiles; the router refuses it.
		{"POST", "/api/v1/routes", map[string]any{"name": "r", "service_id": sid, "paths": []string{"/ok", "~a)(b"}}, "paths[1]"},
		{"POST", "/api/v1/routes", map[string]any{"name": "r", "service_id": sid, "paths": []string{"api"}}, "paths[0]"},
		{"POST", "/api/v1/routes", map[string]any{"name": "r", "service_id": sid, "hosts": []string{"a.*.com"}}, "hosts[0]"},
		{"POST", "/api/v1/routes", map[string]any{"name": "r", "service_id": sid, "splits": []any{map[string]any{"service_id": sid, "weight": 0}}}, "splits[0].weight"},
		{"POST", "/api/v1/routes", map[string]any{"name": "r", "service_id": sid, "splits": []any{map[string]any{"service_id": 999, "weight": 1}}}, "splits[0].service_id"},
		{"PUT", "/api/v1/settings", map[string]any{"http_listen": "nope"}, "http_listen"},
		{"PUT", "/api/v1/settings", map[string]any{"trusted_proxies": []string{"x"}}, "trusted_proxies[0]"},
	}
	for _, c := range cases {
		st, body := g.Do(c.method, c.path, c.body)
		t.Run(c.method+" "+c.path+" "+c.field, func(t *testing.T) { wantError(t, st, body, 400, c.field) })
	}
	// Nothing of it was stored.
	if list := g.List("/api/v1/routes"); len(list) != 0 {
		t.Fatalf("invalid routes were stored: %v", list)
	}
}

func TestNotFoundAndEmptyParents(t *testing.T) {
	g := testgw.Start(t, nil)
	for _, p := range []string{"/api/v1/services/42", "/api/v1/routes/42"} {
		st, body := g.Do("GET", p, nil)
		wantError(t, st, body, 404, "not found")
		st, body = g.Do("DELETE", p, nil)
		wantError(t, st, body, 404, "not found")
	}
	st, body := g.Do("PUT", "/api/v1/targets/42", map[string]any{"host": "h", "port": 1})
	wantError(t, st, body, 404, "not found")
	st, body = g.Do("PUT", "/api/v1/services/42", map[string]any{"name": "x"})
	wantError(t, st, body, 404, "not found")
	// Targets of a service that does not exist: an empty array.
	st, body = g.Do("GET", "/api/v1/services/42/targets", nil)
	if st != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Fatalf("targets of a missing service: %d %s", st, body)
	}
	st, body = g.Do("GET", "/api/v1/routes", nil)
	if st != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Fatalf("empty list: %d %s", st, body)
	}
}

func TestCascadingDeleteAndOrder(t *testing.T) {
	g := testgw.Start(t, nil)
	a := g.Service("a", "127.0.0.1:1", "127.0.0.1:2")
	b := g.Service("b", "127.0.0.1:3")
	r1 := g.Route("r1", a, nil)
	r2 := g.Route("r2", b, map[string]any{"splits": []any{
		map[string]any{"service_id": a, "weight": 1}, map[string]any{"service_id": b, "weight": 1}}})
	var routes []map[string]any
	g.JSON("GET", "/api/v1/routes", nil, &routes)
	if len(routes) != 2 || testgw.ID(routes[0]) != r1 || testgw.ID(routes[1]) != r2 {
		t.Fatalf("routes not ordered by id: %v", routes)
	}
	del := g.Must("DELETE", fmt.Sprintf("/api/v1/services/%d", a), nil)
	if del["deleted"] != true || len(del) != 1 {
		t.Fatalf("delete answer: %v", del)
	}
	var targets []any
	g.JSON("GET", fmt.Sprintf("/api/v1/services/%d/targets", a), nil, &targets)
	if len(targets) != 0 {
		t.Fatalf("targets survived: %v", targets)
	}
	if st, _ := g.Do("GET", fmt.Sprintf("/api/v1/routes/%d", r1), nil); st != 404 {
		t.Fatalf("route of deleted service: %d", st)
	}
	left := g.Must("GET", fmt.Sprintf("/api/v1/routes/%d", r2), nil)
	splits := left["splits"].([]any)
	if len(splits) != 1 || splits[0].(map[string]any)["service_id"] != float64(b) {
		t.Fatalf("split to the deleted service kept: %v", splits)
	}
}

// A list may be asked for a page (?limit=&offset=, in the list's order):
// the answer is still an array, with X-Total-Count; without either
// parameter it is every item and no count. Bad values are 400 naming the
// parameter.
func TestListPages(t *testing.T) {
	g := testgw.Start(t, nil)
	var ids []int64
	for i := range 5 {
		ids = append(ids, g.Service(fmt.Sprint("s", i), "127.0.0.1:1"))
	}
	get := func(query string) ([]int64, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", g.AdminURL+"/api/v1/services"+query, nil)
		for k, v := range g.Header {
			req.Header[k] = v
		}
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var items []map[string]any
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&items) != nil {
			t.Fatalf("%s: %d", query, resp.StatusCode)
		}
		got := []int64{}
		for _, it := range items {
			got = append(got, testgw.ID(it))
		}
		return got, resp.Header.Get("X-Total-Count")
	}
	for _, tc := range []struct {
		query string
		want  []int64
		total string
	}{
		{"", ids, ""},
		{"?limit=2", ids[:2], "5"},
		{"?limit=2&offset=1", ids[1:3], "5"},
		{"?offset=4", ids[4:], "5"},
		{"?offset=9", []int64{}, "5"},
		{"?limit=0", []int64{}, "5"},
	} {
		got, total := get(tc.query)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || total != tc.total {
			t.Fatalf("%q: %v (X-Total-Count %q), want %v (%q)", tc.query, got, total, tc.want, tc.total)
		}
	}
	for _, q := range []string{"?limit=-1", "?limit=x", "?offset=1.5", "?offset=99999999999999999999", "?limit=1&limit=2"} {
		st, body := g.Do("GET", "/api/v1/routes"+q, nil)
		name := "limit"
		if strings.Contains(q, "offset") {
			name = "offset"
		}
		wantError(t, st, body, 400, name)
	}
	// every list of the stored resources takes them
	for _, p := range []string{"/api/v1/routes", "/api/v1/plugins", "/api/v1/consumers", "/api/v1/stream-routes"} {
		if st, body := g.Do("GET", p+"?limit=1&offset=0", nil); st != 200 {
			t.Fatalf("%s: %d %s", p, st, body)
		}
	}
}

func TestConfigSummaryVersionIncreases(t *testing.T) {
	g := testgw.Start(t, nil)
	v1 := g.Must("GET", "/api/v1/config", nil)
	g.Service("a", "127.0.0.1:9")
	v2 := g.Must("GET", "/api/v1/config", nil)
	if v2["version"].(float64) <= v1["version"].(float64) || v2["services"] != 1.0 || v2["targets"] != 1.0 {
		t.Fatalf("config summary: %v then %v", v1, v2)
	}
	st, body := g.Do("GET", "/healthz", nil)
	if st != 200 || string(body) != "ok" {
		t.Fatalf("healthz: %d %q", st, body)
	}
}

func TestRouterDryRun(t *testing.T) {
	g := testgw.Start(t, nil)
	a := g.Service("a")
	b := g.Service("b")
	rid := g.Route("api", a, map[string]any{"hosts": []string{"*.example.com"}, "paths": []string{"/api"}, "strip_path": true})
	g.Route("exact", b, map[string]any{"hosts": []string{"www.example.com"}, "methods": []string{"POST"}, "headers": map[string]string{"X-Env": "*"}})

	res := g.Must("GET", "/api/v1/router/test?host=a.example.com&path=/api/users", nil)
	if res["matched"] != true || res["route_id"] != float64(rid) || res["service_id"] != float64(a) ||
		res["matched_path"] != "/api" || res["upstream_path"] != "/users" {
		t.Fatalf("dry run: %v", res)
	}
	res = g.Must("GET", "/api/v1/router/test?host=www.example.com&path=/x&method=POST&headers=x-env:1", nil)
	if res["matched"] != true || res["service_id"] != float64(b) {
		t.Fatalf("dry run with headers: %v", res)
	}
	res = g.Must("GET", "/api/v1/router/test?host=other.org&path=/api", nil)
	if res["matched"] != false || res["reason"] == nil || res["reason"] == "" {
		t.Fatalf("unmatched dry run: %v", res)
	}
	st, body := g.Do("GET", "/api/v1/router/test?host=x", nil)
	wantError(t, st, body, 400, "path")
	// Same answer as real traffic.
	g.WantGet("other.org", "/api", 404)
}
