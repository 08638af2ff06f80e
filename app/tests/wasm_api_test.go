package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/app/wasmapi"
	"github.com/caddy-gateway/gateway/internal/configref"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm/pwtest"
	"github.com/caddy-gateway/gateway/modules/router"
)

// asFilter is the AssemblyScript-built module (testdata/wasm/as-filter).
func asFilter(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/wasm/as-filter/as-filter.wasm")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func uploadModule(t testing.TB, g *testgw.Gateway, body map[string]any) wasmapi.Module {
	t.Helper()
	var m wasmapi.Module
	st, b := g.Do("POST", "/api/v1/wasm-modules", body)
	if st != 200 {
		t.Fatalf("upload %v: %d %s", body["name"], st, b)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestWasmModuleAPI: upload (WAT and binary), list, validation errors
// naming their field, uniqueness, the size limit, delete, and the config
// summary's count. Answers never carry the bytes.
func TestWasmModuleAPI(t *testing.T) {
	g := testgw.Start(t, nil)
	bin := asFilter(t)

	w := uploadModule(t, g, map[string]any{"name": "minimal", "wat": testgw.MinimalWAT})
	if w.ID == 0 || w.Name != "minimal" || w.SizeBytes == 0 || len(w.SHA256) != 64 || w.CreatedAt.IsZero() {
		t.Fatalf("WAT upload answer: %+v", w)
	}
	b := uploadModule(t, g, map[string]any{"name": "as_filter-1", "wasm_base64": base64.StdEncoding.EncodeToString(bin)})
	if b.SizeBytes != int64(len(bin)) || b.SHA256 != sha(bin) {
		t.Fatalf("binary upload answer: %+v, want size %d sha %s", b, len(bin), sha(bin))
	}
	// Both given: wasm_base64 wins (the WAT here is not even valid).
	both := uploadModule(t, g, map[string]any{"name": "both", "wasm_base64": base64.StdEncoding.EncodeToString(bin), "wat": "(module"})
	if both.SHA256 != sha(bin) {
		t.Fatalf("wasm_base64 must win over wat: %+v", both)
	}
	// base64 wrapped in lines (as the base64 tool writes it) is fine.
	wrapped := base64.StdEncoding.EncodeToString(bin)
	var sb strings.Builder
	for i := 0; i < len(wrapped); i += 76 {
		sb.WriteString(wrapped[i:min(i+76, len(wrapped))] + "\n")
	}
	uploadModule(t, g, map[string]any{"name": "wrapped", "wasm_base64": sb.String()})

	st, raw := g.Do("GET", "/api/v1/wasm-modules", nil)
	if st != 200 {
		t.Fatalf("list: %d %s", st, raw)
	}
	var list []map[string]any
	_ = json.Unmarshal(raw, &list)
	if len(list) != 4 || list[0]["name"] != "minimal" || list[1]["name"] != "as_filter-1" {
		t.Fatalf("list: %s", raw)
	}
	for _, m := range list {
		if len(m) != 5 {
			t.Fatalf("a module answer has exactly id, name, size_bytes, sha256, created_at: %v", m)
		}
	}
	if bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(bin[:64]))) {
		t.Fatal("the list carries module bytes")
	}
	var sum map[string]any
	g.JSON("GET", "/api/v1/config", nil, &sum)
	if sum["wasm_modules"] != float64(4) {
		t.Fatalf("config counts wasm_modules %v, want 4", sum["wasm_modules"])
	}

	// Validation, each naming its field.
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "minimal", "wat": testgw.MinimalWAT}, "name", "exists")
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"wat": testgw.MinimalWAT}, "name")
	for _, bad := range []string{"", "Upper", "a b", "dot.name", strings.Repeat("x", 65), "é"} {
		g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": bad, "wat": testgw.MinimalWAT}, "name")
	}
	uploadModule(t, g, map[string]any{"name": strings.Repeat("x", 64), "wat": testgw.MinimalWAT})
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "none"}, "wasm_base64", "wat")
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "none", "wasm_base64": "", "wat": ""}, "wasm_base64")
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "b64", "wasm_base64": "!!not base64!!"}, "wasm_base64", "base64")
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "junk", "wasm_base64": base64.StdEncoding.EncodeToString([]byte("not a module at all"))}, "wasm_base64")
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "badwat", "wat": "(module\n  (func (export \"f\") (result i32)\n    (i32.const 1) (i32.bogus)))"}, "wat", "3:")
	// A valid module that is not a proxy-wasm plugin.
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "plain", "wat": `(module (func (export "f")))`}, "wat")
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "x", "wat": testgw.MinimalWAT, "bytes": "x"}, "bytes")
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "x", "wat": 5}, "wat")

	// 16 MiB: base64 of a module over the limit exceeds the 20 MiB body
	// limit too; either way it is refused and nothing is stored (the
	// decoded-size check itself is unit-tested in package wasmapi).
	huge := base64.StdEncoding.EncodeToString(make([]byte, 17<<20))
	st, raw = g.Do("POST", "/api/v1/wasm-modules", `{"name":"huge","wasm_base64":"`+huge+`"}`)
	if st != 400 || !(strings.Contains(string(raw), "20 MiB") || strings.Contains(string(raw), "16 MiB")) {
		t.Fatalf("17 MiB module: %d %.300s", st, raw)
	}

	// Delete.
	g.WantError(404, "DELETE", "/api/v1/wasm-modules/9999", nil, "not found")
	g.Must("DELETE", "/api/v1/wasm-modules/"+itoa(both.ID), nil)
	g.WantError(404, "DELETE", "/api/v1/wasm-modules/"+itoa(both.ID), nil)
	g.JSON("GET", "/api/v1/config", nil, &sum)
	if sum["wasm_modules"] != float64(4) {
		t.Fatalf("config counts wasm_modules %v after a delete, want 4", sum["wasm_modules"])
	}
	// The name is free again.
	uploadModule(t, g, map[string]any{"name": "both", "wat": testgw.MinimalWAT})
}

// TestWasmModuleSizeLimit: WAT text over 4 MiB is refused naming wat (by
// the schema's maxLength) before it is assembled (assembling takes memory in proportion to the
// text); binaries go up to 16 MiB (wasmapi's unit test).
func TestWasmModuleSizeLimit(t *testing.T) {
	g := testgw.Start(t, nil)
	data := strings.Repeat("a", (4<<20)+16)
	big := strings.Replace(testgw.MinimalWAT, `(memory (export "memory") 2)`, `(memory (export "memory") 65) (data (i32.const 0) "`+data+`")`, 1)
	body, _ := json.Marshal(map[string]any{"name": "big", "wat": big})
	st, raw := g.Do("POST", "/api/v1/wasm-modules", body)
	if st != 400 || !strings.Contains(string(raw), "wat: ") || !strings.Contains(string(raw), strconv.Itoa(4<<20)) {
		t.Fatalf("WAT text over 4 MiB: %d %.300s", st, raw)
	}
}

// TestWasmModuleRoles: viewers read modules but get 403 on upload and
// delete; editors manage them; anonymous callers get 401.
func TestWasmModuleRoles(t *testing.T) {
	g := testgw.Start(t, nil)
	tok, _ := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	admin := http.Header{}
	admin.Set("Authorization", "Bearer "+tok)
	g.Header = admin
	const pw = "correct-horse-battery"
	g.Must("POST", "/api/v1/users", map[string]any{"email": "viewer@example.test", "role": "viewer", "password": pw})
	g.Must("POST", "/api/v1/users", map[string]any{"email": "editor@example.test", "role": "editor", "password": pw})
	m := uploadModule(t, g, map[string]any{"name": "by-admin", "wat": testgw.MinimalWAT})

	g.Header = http.Header{}
	g.WantError(401, "GET", "/api/v1/wasm-modules", nil)
	g.WantError(401, "POST", "/api/v1/wasm-modules", map[string]any{"name": "anon", "wat": testgw.MinimalWAT})

	g.Header = g.Login("viewer@example.test", pw)
	if st, b := g.Do("GET", "/api/v1/wasm-modules", nil); st != 200 || !strings.Contains(string(b), "by-admin") {
		t.Fatalf("viewer list: %d %s", st, b)
	}
	g.WantError(403, "POST", "/api/v1/wasm-modules", map[string]any{"name": "by-viewer", "wat": testgw.MinimalWAT}, "editor")
	// (Session calls carry Content-Type: application/json, as the
	// dashboard's do: the CSRF rule.)
	g.WantError(403, "DELETE", "/api/v1/wasm-modules/"+itoa(m.ID), "", "editor")

	g.Header = g.Login("editor@example.test", pw)
	e := uploadModule(t, g, map[string]any{"name": "by-editor", "wat": testgw.MinimalWAT})
	g.Must("DELETE", "/api/v1/wasm-modules/"+itoa(e.ID), "")
	g.Must("DELETE", "/api/v1/wasm-modules/"+itoa(m.ID), "")
}

// TestWasmModuleReferences: a wasm plugin must name an existing module
// (400 naming config.module); a module is not deleted while plugins
// reference it (400 listing them); the plugin's handler config (by
// reference from Caddy's JSON config) carries the module's sha256, and
// neither carries its bytes.
func TestWasmModuleReferences(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Echo(t, "up")
	svc := g.Service("s", testgw.Addr(up))
	r1 := g.Route("r1", svc, testgw.Paths("/one"))
	r2 := g.Route("r2", svc, testgw.Paths("/two"))
	bin := asFilter(t)
	m := uploadModule(t, g, map[string]any{"name": "filter", "wasm_base64": base64.StdEncoding.EncodeToString(bin)})
	other := uploadModule(t, g, map[string]any{"name": "other", "wat": testgw.MinimalWAT})

	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "wasm", "scope": "route", "route_id": r1,
		"config": map[string]any{"module": "nope"}}, "config.module", `"nope"`)
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "wasm", "scope": "route", "route_id": r1,
		"config": map[string]any{}}, "config.module")
	p1 := addPlugin(t, g, "wasm", "route", r1, map[string]any{"module": "filter", "config": "v1"})
	p2 := addPlugin(t, g, "wasm", "service", svc, map[string]any{"module": "filter"})
	g.WantError(400, "PUT", "/api/v1/plugins/"+itoa(p2), map[string]any{"type": "wasm", "scope": "service", "service_id": svc,
		"config": map[string]any{"module": "gone"}}, "config.module", `"gone"`)
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "wasm", "scope": "route", "route_id": r2,
		"config": map[string]any{"module": "filter", "module_sha256": m.SHA256}}, "module_sha256")

	g.WantError(400, "DELETE", "/api/v1/wasm-modules/"+itoa(m.ID), nil, `module "filter" is referenced by plugins `+itoa(p1)+", "+itoa(p2))
	// A disabled plugin still references its module.
	g.Must("PUT", "/api/v1/plugins/"+itoa(p1), map[string]any{"type": "wasm", "scope": "route", "route_id": r1, "enabled": false,
		"config": map[string]any{"module": "filter"}})
	g.Must("PUT", "/api/v1/plugins/"+itoa(p2), map[string]any{"type": "wasm", "scope": "service", "service_id": svc,
		"config": map[string]any{"module": "other"}})
	g.WantError(400, "DELETE", "/api/v1/wasm-modules/"+itoa(m.ID), nil, `module "filter" is referenced by plugin `+itoa(p1)+":")
	g.WantError(400, "DELETE", "/api/v1/wasm-modules/"+itoa(other.ID), nil, `referenced by plugin `+itoa(p2))

	// The plugins' handler configs (referenced by Caddy's config): the
	// sha256, not the module; Caddy's config carries no module bytes.
	g.Must("PUT", "/api/v1/plugins/"+itoa(p1), map[string]any{"type": "wasm", "scope": "route", "route_id": r1,
		"config": map[string]any{"module": "filter"}})
	cfg := testgw.CaddyConfig(t, g.CaddyAdmin, "/config/")
	ref := regexp.MustCompile(`"plugins_ref":"([^"]+)"`).FindStringSubmatch(cfg)
	if ref == nil {
		t.Fatalf("Caddy's config references no plugin configs: %.2000s", cfg)
	}
	configs, err := configref.Get[router.PluginConfigs](ref[1])
	if err != nil {
		t.Fatal(err)
	}
	handlers, _ := json.Marshal(configs)
	if !strings.Contains(string(handlers), m.SHA256) || !strings.Contains(string(handlers), other.SHA256) {
		t.Fatalf("the plugin configs do not reference the modules by sha256: %s", handlers)
	}
	if strings.Contains(cfg+string(handlers), base64.StdEncoding.EncodeToString(bin)[:200]) {
		t.Fatal("Caddy's config carries module bytes")
	}

	g.Must("DELETE", "/api/v1/plugins/"+itoa(p1), nil)
	g.Must("DELETE", "/api/v1/wasm-modules/"+itoa(m.ID), nil)
	g.Must("DELETE", "/api/v1/plugins/"+itoa(p2), nil)
	g.Must("DELETE", "/api/v1/wasm-modules/"+itoa(other.ID), nil)
}

// TestWasmModuleHostileUploads: modules an attacker with an editor account
// might upload are refused with 400 in bounded time, naming the field: one
// that loops in its start function, one in proxy_on_vm_start, one that
// wants more memory than an instance may have, one that imports what the
// host does not provide.
func TestWasmModuleHostileUploads(t *testing.T) {
	g := testgw.Start(t, nil)
	for name, wat := range map[string]string{
		"start-loop": `(module (memory (export "memory") 1)
  (func $spin (loop $l (br $l)))
  (start $spin)
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_on_context_create") (param i32 i32)))`,
		"vm-start-loop": strings.Replace(testgw.MinimalWAT, `(func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))`,
			`(func (export "proxy_on_vm_start") (param i32 i32) (result i32) (loop $l (br $l)) (i32.const 1))`, 1),
		"huge-memory":    strings.Replace(testgw.MinimalWAT, `(memory (export "memory") 2)`, `(memory (export "memory") 4000)`, 1),
		"foreign-import": strings.Replace(testgw.MinimalWAT, `(memory (export "memory") 2)`, `(import "evil" "syscall" (func $x)) (memory (export "memory") 2)`, 1),
	} {
		st, b := g.Do("POST", "/api/v1/wasm-modules", map[string]any{"name": name, "wat": wat})
		if st != 400 || !strings.Contains(string(b), "wat:") {
			t.Errorf("%s: %d %s", name, st, b)
		}
	}
	var mods []any
	g.JSON("GET", "/api/v1/wasm-modules", nil, &mods)
	if len(mods) != 0 {
		t.Fatalf("hostile modules were stored: %v", mods)
	}
}

// TestWasmModuleCompileLimits: a module whose compilation would exceed the
// runtime's limits (a function over proxywasm.MaxFunctionBranches: a
// br_table of that many labels) is 400 naming the field it came in, before
// it is compiled, through an upload (wat and wasm_base64) and an import;
// a function at the limit is accepted.
func TestWasmModuleCompileLimits(t *testing.T) {
	g := testgw.Start(t, nil)
	withBranches := func(n int) string {
		fn := `(func (block (br_table ` + strings.Repeat("0 ", n-1) + `(i32.const 0))))`
		return strings.Replace(testgw.MinimalWAT, `(func (export "proxy_on_vm_start")`, fn+`(func (export "proxy_on_vm_start")`, 1)
	}
	over := withBranches(proxywasm.MaxFunctionBranches + 1)
	limit := "the limit is " + strconv.Itoa(proxywasm.MaxFunctionBranches) + " per function"
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "over", "wat": over}, "wat: ", limit)
	bin := pwtest.Compile(t, over)
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "over", "wasm_base64": base64.StdEncoding.EncodeToString(bin)}, "wasm_base64: ", limit)
	g.WantError(400, "POST", "/api/v1/import", map[string]any{"format": "gateway-export", "version": 1,
		"wasm_modules": []any{map[string]any{"name": "over", "wat": over}}}, "wasm_modules[0].wat: ", limit)
	if mods := g.List("/api/v1/wasm-modules"); len(mods) != 0 {
		t.Fatalf("modules over the limit were stored: %v", mods)
	}
	uploadModule(t, g, map[string]any{"name": "at-limit", "wat": withBranches(proxywasm.MaxFunctionBranches)})
}
