package backup_test

import (
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm"
)

// TestWasmModulesBackup: exports carry module metadata always and the
// module only with secrets; a secret export restores modules and the wasm
// plugins that use them (by name); a secret-less one skips both with
// reasons; an invalid module is 400 naming it.
func TestWasmModulesBackup(t *testing.T) {
	g := start(t, nil)
	bin, err := os.ReadFile("../tests/testdata/wasm/as-filter/as-filter.wasm")
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(bin)
	svc := id(g.Must("POST", "/api/v1/services", map[string]any{"name": "s"}))
	g.Must("POST", p("/api/v1/services/%d/targets", svc), map[string]any{"host": "127.0.0.1", "port": 9})
	route := id(g.Must("POST", "/api/v1/routes", map[string]any{"name": "r", "service_id": svc, "paths": []string{"/w"}}))
	filter := g.Must("POST", "/api/v1/wasm-modules", map[string]any{"name": "filter", "wasm_base64": b64})
	g.Must("POST", "/api/v1/wasm-modules", map[string]any{"name": "minimal", "wat": testgw.MinimalWAT})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "wasm", "scope": "route", "route_id": route,
		"config": map[string]any{"module": "filter", "config": map[string]any{"greeting": "hi"}}})

	raw, doc := export(t, g, false)
	mods := doc["wasm_modules"].([]any)
	if len(mods) != 2 {
		t.Fatalf("wasm_modules: %v", mods)
	}
	m0 := mods[0].(map[string]any)
	if m0["name"] != "filter" || m0["sha256"] != filter["sha256"] || m0["size_bytes"] != float64(len(bin)) {
		t.Fatalf("exported module: %v", m0)
	}
	if _, ok := m0["wasm_base64"]; ok || strings.Contains(string(raw), b64[:100]) {
		t.Fatal("an export without secrets carries module bytes")
	}
	_, secret := export(t, g, true)
	if got := secret["wasm_modules"].([]any)[0].(map[string]any)["wasm_base64"]; got != b64 {
		t.Fatal("a secret export lacks the module bytes")
	}

	// Without the bytes: modules and the plugin that needs one are skipped.
	rep := importDoc(t, g, doc)
	if rep.Restored["wasm_modules"] != 0 || rep.Restored["plugins"] != 0 {
		t.Fatalf("restored: %v", rep.Restored)
	}
	reasons := map[string]string{}
	for _, s := range rep.Skipped {
		reasons[s.Kind+" "+s.Ref] = s.Reason
	}
	if !strings.Contains(reasons["wasm_module wasm_modules[0]"], "include_secrets") ||
		!strings.Contains(reasons["wasm_module wasm_modules[1]"], `"minimal"`) ||
		!strings.Contains(reasons["plugin plugins[0]"], `module "filter" is missing`) || len(rep.Skipped) != 3 {
		t.Fatalf("skipped: %v", rep.Skipped)
	}
	if st, b := g.Do("GET", "/api/v1/wasm-modules", nil); st != 200 || string(b) != "[]\n" {
		t.Fatalf("modules after a secret-less import: %d %s", st, b)
	}

	// With the bytes: everything comes back, under the same sha256.
	rep = importDoc(t, g, secret)
	if rep.Restored["wasm_modules"] != 2 || rep.Restored["plugins"] != 1 || len(rep.Skipped) != 0 {
		t.Fatalf("secret import: %+v", rep)
	}
	_, again := export(t, g, false)
	got := again["wasm_modules"].([]any)[0].(map[string]any)
	if got["name"] != "filter" || got["sha256"] != filter["sha256"] {
		t.Fatalf("restored module: %v", got)
	}
	pl := again["plugins"].([]any)[0].(map[string]any)
	if cfg := pl["config"].(map[string]any); cfg["module"] != "filter" {
		t.Fatalf("restored plugin: %v", pl)
	}
	var sum map[string]any
	g.JSON("GET", "/api/v1/config", nil, &sum)
	if sum["wasm_modules"] != float64(2) {
		t.Fatalf("config wasm_modules: %v", sum["wasm_modules"])
	}

	// Invalid modules are 400 naming the item; nothing changes, in the
	// store or in the running configuration (its version).
	var before map[string]any
	g.JSON("GET", "/api/v1/config", nil, &before)
	bad := func(mut func(m map[string]any)) map[string]any {
		_, d := export(t, g, true)
		mut(d["wasm_modules"].([]any)[1].(map[string]any))
		return d
	}
	wantError(t, g, 400, "POST", "/api/v1/import", bad(func(m map[string]any) { m["wasm_base64"] = "%%%" }), "wasm_modules[1].wasm_base64")
	wantError(t, g, 400, "POST", "/api/v1/import", bad(func(m map[string]any) {
		m["wasm_base64"] = base64.StdEncoding.EncodeToString([]byte("\x00asm\x01\x00\x00\x00"))
	}), "wasm_modules[1].wasm_base64")
	wantError(t, g, 400, "POST", "/api/v1/import", bad(func(m map[string]any) { m["name"] = "Bad Name" }), "wasm_modules[1].name")
	wantError(t, g, 400, "POST", "/api/v1/import", bad(func(m map[string]any) { m["name"] = "filter" }), "wasm_modules[1]")
	wantError(t, g, 400, "POST", "/api/v1/import", bad(func(m map[string]any) { delete(m, "wasm_base64"); m["wat"] = "(module" }), "wasm_modules[1].wat")
	// over the compile limits: refused before the runtime compiles it
	slow := `(module (memory (export "memory") 1) (func (block (br_table ` + strings.Repeat("0 ", proxywasm.MaxFunctionBranches) + `(i32.const 0)))))`
	wantError(t, g, 400, "POST", "/api/v1/import", bad(func(m map[string]any) { delete(m, "wasm_base64"); m["wat"] = slow }),
		"wasm_modules[1].wat", "the limit is "+strconv.Itoa(proxywasm.MaxFunctionBranches)+" per function")
	// modules are checked before anything is restored (before the import
	// takes the control plane's lock): their errors come first
	both := bad(func(m map[string]any) { delete(m, "wasm_base64"); m["wat"] = "(module" })
	both["settings"] = 5
	wantError(t, g, 400, "POST", "/api/v1/import", both, "wasm_modules[1].wat")
	if _, d := export(t, g, false); len(d["wasm_modules"].([]any)) != 2 || len(d["plugins"].([]any)) != 1 {
		t.Fatal("a failed import changed the stored configuration")
	}
	var after map[string]any
	g.JSON("GET", "/api/v1/config", nil, &after)
	if after["version"] != before["version"] || after["wasm_modules"] != float64(2) || after["plugins"] != before["plugins"] {
		t.Fatalf("a failed import changed the running configuration: %v -> %v", before, after)
	}

	// A document's module is an upload's input: wat instead of wasm_base64
	// is assembled (and its read-only fields are ignored).
	rep = importDoc(t, g, bad(func(m map[string]any) {
		delete(m, "wasm_base64")
		m["wat"] = testgw.MinimalWAT
		m["sha256"] = "not the module's"
	}))
	if rep.Restored["wasm_modules"] != 2 || len(rep.Skipped) != 0 {
		t.Fatalf("import of a WAT module: %+v", rep)
	}
	if _, d := export(t, g, false); d["wasm_modules"].([]any)[1].(map[string]any)["sha256"] == "not the module's" {
		t.Fatal("an import kept a document's sha256")
	}
}
