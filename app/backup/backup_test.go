package backup_test

import (
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

var secretRe = regexp.MustCompile(`"(password_hash|secret)":|\$2[aby]\$|` + regexp.QuoteMeta(jwtSecret) + `|` + aliceKey + `|` + bobKey + `|` + basicPass)

func TestExportShape(t *testing.T) {
	g := start(t, nil)
	build(t, g)

	raw, doc := export(t, g, false)
	if got, want := slices.Sorted(maps.Keys(doc)), []string{"certificates", "consumers", "exported_at", "format", "plugins", "routes", "secrets_included", "services", "settings", "stream_routes", "version", "wasm_modules"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("document fields %v, want %v", got, want)
	}
	if doc["format"] != "gateway-export" || doc["version"] != float64(1) || doc["secrets_included"] != false {
		t.Fatalf("envelope: %v %v %v", doc["format"], doc["version"], doc["secrets_included"])
	}
	if secretRe.Match(raw) {
		t.Fatalf("the default export carries a secret: %s", secretRe.Find(raw))
	}
	for _, banned := range []string{"token", "users", "sessions", "sso"} {
		if _, ok := doc[banned]; ok {
			t.Fatalf("export has %s", banned)
		}
	}
	services := doc["services"].([]any)
	if len(services) != 3 {
		t.Fatalf("services: %v", services)
	}
	if tg := services[0].(map[string]any)["targets"].([]any); len(tg) != 1 || tg[0].(map[string]any)["port"] == nil {
		t.Fatalf("targets of %v", services[0])
	}
	if n := len(doc["routes"].([]any)); n != 5 {
		t.Fatalf("routes: %d", n)
	}
	if n := len(doc["plugins"].([]any)); n != 5 {
		t.Fatalf("plugins: %d", n)
	}
	if n := len(doc["stream_routes"].([]any)); n != 1 {
		t.Fatalf("stream_routes: %d", n)
	}
	if c, w := doc["certificates"].([]any), doc["wasm_modules"].([]any); len(c) != 0 || len(w) != 0 {
		t.Fatalf("certificates %v, wasm_modules %v", c, w)
	}
	if s := doc["settings"].(map[string]any); s["http_listen"] != g.ProxyAddr {
		t.Fatalf("settings: %v", s)
	}
	consumers := doc["consumers"].([]any)
	alice := consumers[0].(map[string]any)
	creds := alice["credentials"].([]any)
	if alice["username"] != "alice" || len(creds) != 4 {
		t.Fatalf("alice: %v", alice)
	}
	redacted := map[string]any{}
	for _, c := range creds {
		c := c.(map[string]any)
		redacted[c["type"].(string)+"/"+strings.TrimSpace(toString(c["algorithm"]))] = c["redacted"]
	}
	if !reflect.DeepEqual(redacted, map[string]any{
		"key-auth/": []any{"key"}, "basic-auth/": []any{"password_hash"}, "jwt/HS256": []any{"secret"}, "jwt/RS256": nil,
	}) {
		t.Fatalf("redacted: %v", redacted)
	}

	raw, doc = export(t, g, true)
	if doc["secrets_included"] != true {
		t.Fatal("secrets_included is not true")
	}
	for _, want := range []string{jwtSecret, aliceKey, bobKey, `"password_hash":"$2`} {
		if !strings.Contains(string(raw), want) {
			t.Fatalf("the export with secrets lacks %q", want)
		}
	}
	if strings.Contains(string(raw), basicPass) || strings.Contains(string(raw), `"redacted"`) {
		t.Fatalf("export with secrets: %s", raw)
	}
	wantError(t, g, 400, "GET", "/api/v1/export?include_secrets=maybe", nil, "include_secrets")
}

func toString(v any) string { s, _ := v.(string); return s }

// TestRoundTrip exports with secrets, imports into a fresh gateway and
// checks that traffic and authentication work as before.
func TestRoundTrip(t *testing.T) {
	g := start(t, nil)
	f := build(t, g)
	checkTraffic(t, g, f)
	raw, before := export(t, g, true)
	stop(t)

	g = start(t, nil) // a new store
	g.Must("POST", "/api/v1/services", map[string]any{"name": "replaced"})
	rep := importDoc(t, g, raw)
	want := map[string]int{"services": 3, "targets": 3, "routes": 5, "stream_routes": 1, "plugins": 5, "consumers": 2, "credentials": 5, "certificates": 0, "wasm_modules": 0}
	if !reflect.DeepEqual(rep.Restored, want) || len(rep.Skipped) != 0 {
		t.Fatalf("report %+v, want restored %v and nothing skipped", rep, want)
	}
	// The document's listener settings apply: the proxy moved to the old address.
	followProxy(g)
	if g.ProxyAddr != before["settings"].(map[string]any)["http_listen"] {
		t.Fatalf("proxy listens on %s", g.ProxyAddr)
	}
	checkTraffic(t, g, f)

	// The same configuration, under new ids.
	_, after := export(t, g, true)
	if got := normalize(after); !reflect.DeepEqual(got, normalize(before)) {
		t.Fatalf("re-exported configuration differs:\n%v\nwant\n%v", got, normalize(before))
	}
	var svcs []map[string]any
	g.JSON("GET", "/api/v1/services", nil, &svcs)
	if len(svcs) != 3 || svcs[0]["name"] != "svc-a" {
		t.Fatalf("services after import: %v", svcs)
	}

	// The stream route binds at the next start.
	dsn := g.DSN
	stop(t)
	g = start(t, &testgw.Options{DSN: dsn})
	if got, err := testgw.TCPSay(f.streamAddr, "hi"); err != nil || got != "tcp: hi" {
		t.Fatalf("stream route after import and restart: %q %v", got, err)
	}
	checkTraffic(t, g, f)
}

// normalize drops ids and timestamps and puts names in place of id
// references, so two exports of the same configuration compare equal.
func normalize(doc map[string]any) map[string]any {
	svcName, routeName := map[float64]string{}, map[float64]string{}
	for _, s := range doc["services"].([]any) {
		s := s.(map[string]any)
		svcName[s["id"].(float64)] = s["name"].(string)
	}
	for _, r := range doc["routes"].([]any) {
		r := r.(map[string]any)
		routeName[r["id"].(float64)] = r["name"].(string)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				switch k {
				case "id", "created_at", "updated_at", "exported_at", "consumer_id":
				case "service_id":
					if n, ok := e.(float64); ok {
						out[k] = svcName[n]
					} else {
						out[k] = e
					}
				case "route_id":
					if n, ok := e.(float64); ok {
						out[k] = routeName[n]
					} else {
						out[k] = e
					}
				default:
					out[k] = walk(e)
				}
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = walk(e)
			}
			return out
		}
		return v
	}
	return walk(doc).(map[string]any)
}

// TestImportSkips imports a secret-less export (plus items this gateway
// cannot restore): they are skipped with reasons, the rest is restored.
func TestImportSkips(t *testing.T) {
	g := start(t, nil)
	f := build(t, g)
	_, doc := export(t, g, false)
	doc["plugins"] = append(doc["plugins"].([]any),
		map[string]any{"id": 90, "type": "wasm", "scope": "global", "config": map[string]any{"module": "filter"}},
		map[string]any{"id": 91, "type": "no-such-plugin", "scope": "global", "config": map[string]any{}},
		map[string]any{"id": 92, "type": "wasm", "scope": "global"},
	)
	doc["certificates"] = []any{map[string]any{"id": 1, "domains": []string{"example.com"}}}
	rep := importDoc(t, g, doc)
	if rep.Restored["credentials"] != 1 || rep.Restored["consumers"] != 2 || rep.Restored["plugins"] != 5 || rep.Restored["routes"] != 5 || rep.Restored["certificates"] != 0 {
		t.Fatalf("restored: %v", rep.Restored)
	}
	got := map[string]string{}
	for _, s := range rep.Skipped {
		got[s.Kind+" "+s.Ref] = s.Reason
	}
	for ref, fragment := range map[string]string{
		"credential consumers[0].credentials[0]": "redacted", // alice key-auth
		"credential consumers[0].credentials[1]": "password_hash",
		"credential consumers[0].credentials[2]": "secret",
		"credential consumers[1].credentials[0]": "redacted", // bob key-auth
		"plugin plugins[5]":                      `module "filter" is missing`,
		"plugin plugins[6]":                      `unknown plugin type "no-such-plugin"`,
		"plugin plugins[7]":                      `module "" is missing`,
		"certificate certificates[0]":            "private key is not in the document",
	} {
		if !strings.Contains(got[ref], fragment) {
			t.Fatalf("skipped %s: %q, want it to mention %q (all: %v)", ref, got[ref], fragment, got)
		}
	}
	if len(rep.Skipped) != 8 {
		t.Fatalf("skipped: %v", got)
	}
	// What was restored works; the skipped credentials are gone.
	if r := get(t, g, "/ka", "apikey", aliceKey); r.Status != 401 {
		t.Fatalf("a skipped key-auth key still works: %d", r.Status)
	}
	if r := get(t, g, "/b/"); r.Status != 200 || r.Header.Get("X-Service") != "b" {
		t.Fatalf("/b: %+v", r)
	}
	if r := get(t, g, "/jw", "Authorization", "Bearer "+sign(t, jwt.SigningMethodRS256, "iss-rsa", f.rsaKey)); r.Status != 200 || r.Consumer != "alice" {
		t.Fatalf("the restored RS256 credential: %+v", r)
	}
}

// TestImportRejects: a wrong envelope or an invalid item is 400 and the
// running and stored configuration stay as they were.
func TestImportRejects(t *testing.T) {
	g := start(t, nil)
	f := build(t, g)
	raw, _ := export(t, g, true)
	fresh := func() map[string]any {
		var d map[string]any
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	set := func(mut func(d map[string]any)) map[string]any { d := fresh(); mut(d); return d }
	item := func(d map[string]any, list string, i int) map[string]any { return d[list].([]any)[i].(map[string]any) }

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	for _, c := range []struct {
		doc       any
		fragments []string
	}{
		{"[]", []string{"export document"}},
		{set(func(d map[string]any) { delete(d, "format") }), []string{"format", "gateway-export"}},
		{set(func(d map[string]any) { d["format"] = "kong" }), []string{"format"}},
		{set(func(d map[string]any) { d["version"] = 2 }), []string{"version"}},
		{set(func(d map[string]any) { delete(d, "version") }), []string{"version"}},
		{set(func(d map[string]any) { d["applications"] = []any{} }), []string{"applications", "unknown field"}},
		{set(func(d map[string]any) { d["routes"] = map[string]any{} }), []string{"routes", "array"}},
		{set(func(d map[string]any) { item(d, "routes", 2)["paths"] = []any{"/ok", "no-slash"} }), []string{"routes[2].paths[1]"}},
		{set(func(d map[string]any) { item(d, "routes", 1)["service_id"] = 999 }), []string{"routes[1].service_id", "999"}},
		{set(func(d map[string]any) {
			item(d, "routes", 0)["splits"] = []any{map[string]any{"service_id": 998, "weight": 1}}
		}), []string{"routes[0].splits[0].service_id"}},
		{set(func(d map[string]any) { item(d, "routes", 0)["colour"] = "red" }), []string{"routes[0].colour", "unknown field"}},
		{set(func(d map[string]any) { item(d, "routes", 0)["priority"] = "high" }), []string{"routes[0].priority"}},
		{set(func(d map[string]any) { item(d, "routes", 0)["id"] = "one" }), []string{"routes[0].id"}},
		{set(func(d map[string]any) { item(d, "routes", 1)["id"] = item(d, "routes", 0)["id"] }), []string{"routes[1].id", "used by another"}},
		{set(func(d map[string]any) { d["services"].([]any)[0] = "svc" }), []string{"services[0]", "object"}},
		{set(func(d map[string]any) { item(d, "services", 1)["protocol"] = "gopher" }), []string{"services[1].protocol"}},
		{set(func(d map[string]any) {
			item(d, "services", 1)["targets"].([]any)[0].(map[string]any)["port"] = 70000
		}), []string{"services[1].targets[0].port"}},
		{set(func(d map[string]any) { item(d, "plugins", 3)["config"] = map[string]any{"nope": 1} }), []string{"plugins[3].config.nope"}},
		{set(func(d map[string]any) { item(d, "plugins", 0)["route_id"] = 12345 }), []string{"plugins[0].route_id"}},
		{set(func(d map[string]any) {
			d["plugins"] = append(d["plugins"].([]any), item(d, "plugins", 0))
		}), []string{"plugins[5]", "already exists"}},
		{set(func(d map[string]any) { item(d, "consumers", 1)["username"] = "alice" }), []string{"consumers[1].username", "taken"}},
		{set(func(d map[string]any) {
			item(d, "consumers", 0)["credentials"].([]any)[1].(map[string]any)["password_hash"] = "plain"
		}), []string{"consumers[0].credentials[1].password_hash", "bcrypt"}},
		{set(func(d map[string]any) {
			item(d, "consumers", 1)["credentials"].([]any)[0].(map[string]any)["key"] = aliceKey
		}), []string{"consumers[1].credentials[0].key", "already used"}},
		{set(func(d map[string]any) {
			item(d, "consumers", 0)["credentials"].([]any)[3].(map[string]any)["public_key"] = "not a key"
		}), []string{"consumers[0].credentials[3].public_key"}},
		{set(func(d map[string]any) {
			d["stream_routes"] = append(d["stream_routes"].([]any), item(d, "stream_routes", 0))
		}), []string{"stream_routes[1].listen_addr"}},
		{set(func(d map[string]any) { d["settings"].(map[string]any)["trusted_proxies"] = []any{"nope"} }), []string{"settings.trusted_proxies[0]"}},
		// A listener that cannot be bound fails the load: rolled back.
		{set(func(d map[string]any) { d["settings"].(map[string]any)["http_listen"] = busy.Addr().String() }), []string{"rejected"}},
	} {
		wantError(t, g, 400, "POST", "/api/v1/import", c.doc, c.fragments...)
	}
	// Nothing changed: same store, same traffic.
	_, now := export(t, g, true)
	if !reflect.DeepEqual(normalize(now), normalize(fresh())) {
		t.Fatal("a rejected import changed the stored configuration")
	}
	checkTraffic(t, g, f)
}

// TestRoles: viewers and editors export without secrets only; secrets and
// import are admin only; an import leaves users and the admin token alone.
func TestRoles(t *testing.T) {
	g := start(t, nil)
	g.Must("POST", "/api/v1/services", map[string]any{"name": "s"})
	tok := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	admin := "Bearer " + tok
	g.Header.Set("Authorization", admin)
	for _, u := range []map[string]any{
		{"email": "viewer@example.com", "role": "viewer", "password": "viewer-pass"},
		{"email": "editor@example.com", "role": "editor", "password": "editor-pass"},
	} {
		g.Must("POST", "/api/v1/users", u)
	}
	raw, _ := export(t, g, true)
	login := func(email, pw string) string {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"email": email, "password": pw})
		resp, err := http.Post(g.AdminURL+"/api/v1/auth/login", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "gateway_session" {
				return c.Name + "=" + c.Value
			}
		}
		t.Fatalf("login %s: %d, no session cookie", email, resp.StatusCode)
		return ""
	}
	for _, who := range []struct{ email, pw string }{{"viewer@example.com", "viewer-pass"}, {"editor@example.com", "editor-pass"}} {
		cookie := login(who.email, who.pw)
		g.Header.Del("Authorization")
		g.Header.Set("Cookie", cookie)
		body, doc := export(t, g, false)
		if doc["secrets_included"] != false || secretRe.Match(body) {
			t.Fatalf("%s: export %s", who.email, body)
		}
		wantError(t, g, 403, "GET", "/api/v1/export?include_secrets=true", nil)
		wantError(t, g, 403, "POST", "/api/v1/import", raw)
		g.Header.Del("Cookie")
	}
	g.Header.Del("Cookie")
	wantError(t, g, 401, "GET", "/api/v1/export", nil)
	wantError(t, g, 401, "POST", "/api/v1/import", raw)

	g.Header.Set("Authorization", admin)
	rep := importDoc(t, g, raw)
	if rep.Restored["services"] != 1 {
		t.Fatalf("report: %+v", rep)
	}
	var users []map[string]any
	if st := g.JSON("GET", "/api/v1/users", nil, &users); st != 200 || len(users) != 2 {
		t.Fatalf("users after import: %d %v", st, users)
	}
	login("viewer@example.com", "viewer-pass")
}

// TestImportMinimal: a document with only the envelope empties the routing
// configuration and leaves the settings as they are.
func TestImportMinimal(t *testing.T) {
	g := start(t, nil)
	build(t, g)
	settings := g.Must("GET", "/api/v1/settings", nil)
	settings["trusted_proxies"] = []any{"10.0.0.0/8"}
	delete(settings, "updated_at")
	g.Must("PUT", "/api/v1/settings", settings)

	rep := importDoc(t, g, map[string]any{"format": "gateway-export", "version": 1, "settings": nil})
	for k, n := range rep.Restored {
		if n != 0 {
			t.Fatalf("restored %s: %d", k, n)
		}
	}
	if len(rep.Restored) != 9 || rep.Skipped == nil || len(rep.Skipped) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	var cfg map[string]any
	g.JSON("GET", "/api/v1/config", nil, &cfg)
	for _, k := range []string{"services", "targets", "routes", "stream_routes", "plugins", "consumers", "credentials"} {
		if cfg[k] != float64(0) {
			t.Fatalf("config %s: %v", k, cfg[k])
		}
	}
	if got := g.Must("GET", "/api/v1/settings", nil); !reflect.DeepEqual(got["trusted_proxies"], []any{"10.0.0.0/8"}) {
		t.Fatalf("settings changed: %v", got)
	}
	if r := get(t, g, "/b/"); r.Status != 404 {
		t.Fatalf("after emptying: %d", r.Status)
	}
}
