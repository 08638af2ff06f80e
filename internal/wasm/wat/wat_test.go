package wat

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/caddy-gateway/gateway/internal/wasm/internal/wasmtest"
)

// wat2wasmPath returns wabt's assembler, the reference for the differential
// test. `make test-deps` installs it; outside CI a missing one skips.
func wat2wasmPath(t testing.TB) string { return wasmtest.Tool(t, "wat2wasm") }

func wat2wasm(t *testing.T, bin, file string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.wasm")
	if msg, err := exec.Command(bin, file, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s: %v\n%s", file, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// notByteIdentical lists corpus files whose output is allowed to differ
// from wat2wasm's, with the reason. Today every file matches byte for byte.
var notByteIdentical = map[string]string{}

// TestCorpusAgainstWat2wasm assembles every testdata/*.wat with Compile and
// with wat2wasm: both must compile in wazero, the bytes must be identical,
// and every exported test_* function must return the same in both builds.
func TestCorpusAgainstWat2wasm(t *testing.T) {
	bin := wat2wasmPath(t)
	files, err := filepath.Glob("testdata/*.wat")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 25 {
		t.Fatalf("corpus has %d files, expected at least 25", len(files))
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)

	calls, ran := 0, 0
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Compile(src)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			want := wat2wasm(t, bin, file)

			gotMod, err := rt.CompileModule(ctx, got)
			if err != nil {
				t.Fatalf("wazero rejects Compile's output: %v", err)
			}
			defer gotMod.Close(ctx)
			wantMod, err := rt.CompileModule(ctx, want)
			if err != nil {
				t.Fatalf("wazero rejects wat2wasm's output: %v", err)
			}
			defer wantMod.Close(ctx)

			if why, ok := notByteIdentical[filepath.Base(file)]; ok {
				t.Logf("not compared byte for byte: %s", why)
			} else if !bytes.Equal(got, want) {
				t.Errorf("output differs from wat2wasm's:\n%s", diffHex(got, want))
			}

			calls += compareRuns(t, ctx, got, want)
			ran++
		})
	}
	if ran == len(files) && calls < 40 {
		t.Errorf("only %d test_* functions were run across the corpus", calls)
	}
}

// TestSnippetsAgainstWat2wasm: each line of testdata/snippets.txt is a
// small module exercising one corner (index spaces, implicit types, segment
// forms, LEB edge values); each must assemble to wat2wasm's bytes.
func TestSnippetsAgainstWat2wasm(t *testing.T) {
	bin := wat2wasmPath(t)
	text, err := os.ReadFile("testdata/snippets.txt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		file := filepath.Join(dir, fmt.Sprintf("s%d.wat", i+1))
		if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Compile([]byte(line))
		if err != nil {
			t.Errorf("line %d: %s: %v", i+1, line, err)
			continue
		}
		if want := wat2wasm(t, bin, file); !bytes.Equal(got, want) {
			t.Errorf("line %d: %s: differs from wat2wasm:\n%s", i+1, line, diffHex(got, want))
		}
	}
}

// compareRuns instantiates both builds (when all their imports are
// functions, which get stubs returning zeros) and compares the results of
// every exported test_* function taking no parameters.
func compareRuns(t *testing.T, ctx context.Context, got, want []byte) int {
	t.Helper()
	gotRes, ok := runTests(t, ctx, got)
	if !ok {
		return 0
	}
	wantRes, _ := runTests(t, ctx, want)
	if len(gotRes) != len(wantRes) {
		t.Fatalf("test functions differ: %v vs %v", gotRes, wantRes)
	}
	for name, g := range gotRes {
		if w := wantRes[name]; g != w {
			t.Errorf("%s: Compile's build returns %s, wat2wasm's %s", name, g, w)
		}
	}
	return len(gotRes)
}

func runTests(t *testing.T, ctx context.Context, bin []byte) (map[string]string, bool) {
	t.Helper()
	// A fresh runtime per instance: a stub "env" host module may be needed.
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	cm, err := rt.CompileModule(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.ImportedMemories()) > 0 {
		return nil, false
	}
	for _, imp := range cm.ImportedFunctions() {
		mod, _, _ := imp.Import()
		if mod != "env" {
			return nil, false
		}
	}
	if fns := cm.ImportedFunctions(); len(fns) > 0 {
		b := rt.NewHostModuleBuilder("env")
		for _, f := range fns {
			_, name, _ := f.Import()
			results := f.ResultTypes()
			b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
				for i := range results {
					stack[i] = 0
				}
			}), f.ParamTypes(), results).Export(name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			t.Fatalf("stub env: %v", err)
		}
	}
	// Modules importing globals or tables cannot be satisfied by stubs.
	mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		if strings.Contains(err.Error(), "import") || strings.Contains(err.Error(), "not instantiated") {
			return nil, false
		}
		t.Fatalf("instantiate: %v", err)
	}
	res := map[string]string{}
	// In name order: test functions may share state (memory, tables).
	defs := cm.ExportedFunctions()
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		if !strings.HasPrefix(name, "test_") || len(defs[name].ParamTypes()) != 0 {
			continue
		}
		out, err := mod.ExportedFunction(name).Call(ctx)
		res[name] = fmt.Sprintf("%v %v", out, err)
	}
	return res, true
}

// diffHex shows where two encodings first differ.
func diffHex(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-16)
	return fmt.Sprintf("first difference at byte %d (len %d vs %d)\n got  ...% x\n want ...% x",
		i, len(got), len(want), got[lo:min(len(got), i+16)], want[lo:min(len(want), i+16)])
}

func mustCompile(t *testing.T, src string) []byte {
	t.Helper()
	b, err := Compile([]byte(src))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return b
}

// Legacy instruction names (no longer accepted by wat2wasm) assemble to the
// same bytes as the current ones.
func TestLegacyNames(t *testing.T) {
	legacy, err := os.ReadFile("testdata/legacy/legacy_names.wat")
	if err != nil {
		t.Fatal(err)
	}
	modern, err := os.ReadFile("testdata/legacy_modern.wat")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustCompile(t, string(legacy)), mustCompile(t, string(modern)); !bytes.Equal(a, b) {
		t.Fatalf("legacy names assemble differently:\n%s", diffHex(a, b))
	}
	if a, b := mustCompile(t, "\uFEFF(table 1 anyfunc)"), mustCompile(t, "(table 1 funcref)"); !bytes.Equal(a, b) {
		t.Fatal("anyfunc differs from funcref")
	}
	// Table indices may be left out of table instructions (the spec's
	// abbreviation; wat2wasm 1.0.32 insists on them).
	short := `(table 1 funcref) (elem $e func) (func (result i32) table.size (drop (table.get (i32.const 0)))
		(table.copy (i32.const 0) (i32.const 0) (i32.const 0)) (table.init $e (i32.const 0) (i32.const 0) (i32.const 0)))`
	long := `(table 1 funcref) (elem $e func) (func (result i32) table.size 0 (drop (table.get 0 (i32.const 0)))
		(table.copy 0 0 (i32.const 0) (i32.const 0) (i32.const 0)) (table.init 0 $e (i32.const 0) (i32.const 0) (i32.const 0)))`
	if a, b := mustCompile(t, short), mustCompile(t, long); !bytes.Equal(a, b) {
		t.Fatalf("omitted table indices assemble differently:\n%s", diffHex(a, b))
	}
}

func TestExpectedResults(t *testing.T) {
	// Independent of wat2wasm: a few results worked out by hand.
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	for _, c := range []struct {
		file, fn string
		want     uint64
	}{
		{"control_flat.wat", "test_fact", 2432902008176640000},
		{"control_flat.wat", "test_br_table", 100 + 101 + 102 + 199 + 199},
		{"control_folded.wat", "test_count", 17},
		{"call_indirect.wat", "test_indirect", 12 + 2 + 35},
		{"call_indirect.wat", "test_indirect_inline", uint64(0xFFFFFFF7)}, // -9
		{"labels.wat", "test_labels", 50},
		{"labels.wat", "test_shadowed", 11},
		{"multivalue.wat", "test_multi_call", uint64(0xFFFFFFF9)}, // swap: 3 - 10
		{"bulk_memory.wat", "test_copy", 0x6665646362616261},      // "ababcdef"
		{"start.wat", "test_start", 123},
		{"bare_fields.wat", "test_bare", 42},
		{"signext_sat.wat", "test_signext", 0},
	} {
		t.Run(c.file+"/"+c.fn, func(t *testing.T) {
			src, err := os.ReadFile("testdata/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := rt.Instantiate(ctx, mustCompile(t, string(src)))
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			out, err := mod.ExportedFunction(c.fn).Call(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c.fn == "test_signext" {
				return // only checks it runs; the corpus test compares the value
			}
			if out[0] != c.want {
				t.Fatalf("got %d (%#x), want %d", out[0], out[0], c.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`(module (func i32.ad))`, `line 1:15: unknown instruction "i32.ad" (did you mean i32.add?)`},
		{`(module (func (local.gett 0)))`, `unknown instruction "local.gett" (did you mean local.get?)`},
		{`(module (func frobnicate))`, `unknown instruction "frobnicate"`},
		{"(module\n  (func (local.get $x) drop))", `line 2:20: unknown local $x`},
		{`(module (func (i32.const 1)`, `line 1:28: expected ')', found end of input`},
		{`(module (func (result i32)))`, `line 1:27: type mismatch in function end: expected i32, but the stack is empty`},
		{`(module (func (block (result i32) (nop))))`, `line 1:40: type mismatch in end of block: expected i32, but the stack is empty`},
		{`(module (func (block (result i32) (i32.const 1) (i32.const 2)) drop))`, `line 1:62: type mismatch at end of block: 1 more value(s) on the stack than the block's results [i32]`},
		{`(module (table 134217729 funcref))`, `table size 134217729 is over the limit of 134217728 elements`},
		{`(module (func (call $nope)))`, `line 1:21: unknown func $nope`},
		{`(module (func (br $l)))`, `line 1:19: unknown label $l`},
		{`(module (func (br 3)))`, `line 1:19: unknown label: depth 3 but only 1 enclosing block(s)`},
		{`(module (func (local.get 5) drop))`, `line 1:26: local index 5 out of range (0 params and locals)`},
		{`(module (func (drop (i32.const 4294967296))))`, `line 1:32: invalid i32.const operand "4294967296": integer constant out of range`},
		{`(module (func (drop (i32.const -2147483649))))`, `integer constant out of range`},
		{`(module (func (drop (i64.const 18446744073709551616))))`, `integer constant out of range`},
		{`(module (func (drop (i32.const 0x))))`, `invalid i32.const operand "0x": malformed number`},
		{`(module (func (drop (i32.const 1__0))))`, `malformed number`},
		{`(module (func (drop (f32.const 1e39))))`, `float constant out of range`},
		{`(module (func (drop (f32.const nan:0x800000))))`, `NaN payload out of range`},
		{`(module (func (drop (f64.const .5))))`, `malformed number`},
		{`(module (func (drop (f64.const 0x.8))))`, `malformed number`},
		{`(module (func block))`, `line 1:15: block is missing its end`},
		{`(module (func end))`, `line 1:15: end without a matching block, loop or if`},
		{`(module (func else))`, `line 1:15: else without a matching if`},
		{`(module (func block $a end $b))`, `label $b does not match the block's label "$a"`},
		{`(module (func (if (i32.const 1) (nop))))`, `line 1:38: expected (then ...) in folded if, found ')'`},
		{`(module (func (result i32) (if (result i32) (i32.const 1) (then (i32.const 2)))))`, `if without else must have the same parameter and result types`},
		{`(module (func (i32.load (i32.const 0)) drop))`, `line 1:16: i32.load needs a memory, but the module has none`},
		{`(module (memory 1) (func (i32.load align=8 (i32.const 0)) drop))`, `alignment of i32.load must not be larger than its natural alignment 4`},
		{`(module (memory 1) (func (i32.load align=3 (i32.const 0)) drop))`, `invalid alignment "align=3" (a power of two)`},
		{`(module (memory 1) (func (i32.load offset=4294967296 (i32.const 0)) drop))`, `invalid memory offset`},
		{`(module (global i32 (i32.const 0)) (func (global.set 0 (i32.const 1))))`, `global.set of immutable global 0`},
		{`(module (func $f) (func $f))`, `line 1:25: duplicate func $f`},
		{`(module (func (param $x i32) (local $x i32)))`, `duplicate local $x`},
		{`(module (func (param $x i32) (param $x i32)))`, `duplicate parameter $x`},
		{`(module (export "a" (func 0)) (export "a" (func 0)) (func))`, `line 1:31: duplicate export name "a"`},
		{`(module (func) (import "a" "b" (func)))`, `imports must come before the module's own definitions (the first is at line 1:9)`},
		{`(module (type $t (func (param i32))) (func (type $t) (param i64)))`, `inline signature (i64) -> () does not match type $t (i32) -> ()`},
		{`(module (type $t (func)) (func (type $u)))`, `unknown type $u`},
		{`(module "x")`, `line 1:9: expected ')', found string`},
		{`(module (data (i32.const 0) "\q"))`, `line 1:30: unknown escape in string`},
		{`(module (data (i32.const 0) "\u{D800}"))`, `not a Unicode scalar value`},
		{`(module (data (i32.const 0) "\u{110000}"))`, `\u escape out of range`},
		{"(module (data (i32.const 0) \"a\nb\"))", `control character in string`},
		{"(module (data (i32.const 0) \"\xff\"))", `invalid UTF-8 in string`},
		{`(module (data (i32.const 0) "abc`, `line 1:29: unterminated string`},
		{"(module)\n(; abc", `line 2:1: unterminated block comment`},
		{"", `line 1:1: empty input: expected (module ...)`},
		{";; nothing\n(; here ;)", `line 2:11: empty input`},
		{`(module (import "a" "b" ("func")))`, `line 1:26: expected func, table, memory or global in import, found string`},
		{`(module (func) (export "a" ("func" 0)))`, `line 1:29: expected func, table, memory or global in export, found string`},
		{`(module (foo))`, `unknown module field "foo"`},
		{`(module (func (i32.add (i32.const 1) (i64.const 2)) drop))`, `line 1:16: type mismatch in i32.add: expected i32, got i64`},
		{`(module (func i32.const 1 i32.const 2))`, `type mismatch at the end of the function: 2 more value(s) on the stack than the block's results []`},
		{`(module (func (select (i32.const 1) (i64.const 2) (i32.const 0)) drop))`, `type mismatch in select: expected i64, got i32`},
		{`(module (start 0) (func (param i32)))`, `start function must take no parameters and return nothing`},
		{`(module (memory 70000))`, `line 1:9: memory size 70000 pages is over the limit of 65536`},
		{`(module (memory 2 1))`, `memory size minimum 2 is larger than its maximum 1`},
		{`(module (table 2 1 funcref))`, `line 1:9: table size minimum 2 is larger than its maximum 1`},
		{`(module (memory 1) (memory 1))`, `line 1:20: more than one memory: multiple memories are not supported`},
		{`(module (table 1 funcref) (elem (i32.const 0) $nope))`, `unknown func $nope`},
		{`(module (global i32 (i32.add (i32.const 1) (i32.const 2))))`, `global initializer must be a single constant instruction`},
		{`(module (global i32 (i64.const 1)))`, `type mismatch in global initializer: expected i32, got i64`},
		{`(module (global $g (mut i32) (i32.const 0)) (global i32 (global.get $g)))`, `may only read an imported immutable global`},
		{`(module (func (call_indirect (type 0) (i32.const 0))) (type (func)))`, `unknown table 0: the module has none`},
		{`(module (func (drop (i32.const 1) 5)))`, `line 1:35: expected ')' to close drop (or a folded operand), found "5"`},
		{`(module (func $f (param i32) (call $f)))`, `type mismatch in call: expected i32, but the stack is empty`},
		{`(module (func (br_table)))`, `br_table needs at least one label`},
		{`(module (func (block (result i32) (br_table 0 1 (i32.const 1) (i32.const 0)))))`, `br_table targets must have the same number of results`},
		{`(module (memory 1 shared))`, `shared memories are not supported`},
		{`(module (table 1 externref) (func $f) (elem (i32.const 0) func $f))`, `line 1:39: elem segment of funcref for a table of externref`},
		{`(module (func $f (drop (ref.func $f))))`, `ref.func $f: the function must also be referenced outside function bodies`},
		{`(module (func (result i32) (ref.is_null (i32.const 0))))`, `type mismatch in ref.is_null: expected a reference, got i32`},
		{`(module (func (param funcref funcref) (drop (select (local.get 0) (local.get 1) (i32.const 1)))))`, `select of references needs a type: select (result funcref)`},
		{`(module (table 1 funcref) (func (table.set (i32.const 0) (ref.null extern))))`, `type mismatch in table.set: expected funcref, got externref`},
		{`(module (func (drop (ref.null any))))`, `expected func or extern after ref.null, found "any"`},
		{`(module (table 1 funcref) (elem func 0) (func (elem.drop 1)))`, `elem segment index 1 out of range (1 defined)`},
		{`(module binary "\00asm")`, `(module binary ...) is not supported`},
		{`(module) (module)`, `expected end of input after the module`},
		{`(module (func)) x`, `expected end of input after the module, found "x"`},
		{`(func) x`, `expected '(' to start a module field, found "x"`},
		{`(module (func v128.const i32x4 0 0 0 0))`, `unknown instruction "v128.const"`},
		{`(module (func $ (nop)))`, `empty $name`},
		{"(module (func \x01))", `unexpected character '\x01'`},
		{`(module (func (i32.const 1)"x"))`, `found string`},
		{`(module (func (i32.const 1"x")))`, `line 1:27: unexpected '"' right after "1" (tokens need white space between them)`},
		{`(module (data (i32.const 0) "a"))`, `line 1:9: unknown memory 0: the module has none`},
		{"(module (func " + strings.Repeat("(block ", 2000), `expressions nested too deeply (more than 1000 levels)`},
		{"(module (func " + strings.Repeat("(i32.eqz ", 1500) + "(i32.const 0)" + strings.Repeat(")", 1500) + " drop))", `nested too deeply`},
	} {
		_, err := Compile([]byte(c.src))
		if err == nil {
			t.Errorf("%.60q: no error, want %q", c.src, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60q:\n got  %v\n want %s", c.src, err, c.want)
		}
		var e *Error
		if !asError(err, &e) || e.Line < 1 || e.Col < 1 {
			t.Errorf("%.60q: error %v carries no position", c.src, err)
		}
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	*target = e
	return ok
}

func TestNumbers(t *testing.T) {
	for _, c := range []struct {
		s    string
		bits int
		want uint64
	}{
		{"0", 32, 0}, {"-1", 32, 0xFFFFFFFF}, {"4294967295", 32, 0xFFFFFFFF},
		{"-2147483648", 32, 0x80000000}, {"0x_1", 32, 0}, {"1_0", 32, 10},
		{"+0xA_b", 32, 0xAB}, {"-9223372036854775808", 64, 1 << 63},
		{"18446744073709551615", 64, 1<<64 - 1}, {"-0x1", 64, 1<<64 - 1},
	} {
		got, err := parseInt(c.s, c.bits)
		if c.s == "0x_1" {
			if err == nil {
				t.Errorf("parseInt(%q) accepted", c.s)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseInt(%q, %d) = %#x, %v; want %#x", c.s, c.bits, got, err, c.want)
		}
	}
	for _, c := range []struct {
		s    string
		bits int
		want uint64
	}{
		{"0", 32, 0}, {"-0", 32, 0x80000000}, {"1", 32, 0x3F800000},
		{"0x1p-149", 32, 1}, {"0x1.fffffep127", 32, 0x7F7FFFFF},
		{"0x1.000001p0", 32, 0x3F800000}, // ties to even: down
		{"0x1.000003p0", 32, 0x3F800002}, // ties to even: up
		{"16777217", 32, 0x4B800000},
		{"inf", 32, 0x7F800000}, {"-inf", 32, 0xFF800000}, {"nan", 32, 0x7FC00000},
		{"-nan", 32, 0xFFC00000}, {"nan:0x1", 32, 0x7F800001}, {"nan:0x7f_ffff", 32, 0x7FFFFFFF},
		{"0x1.8", 32, 0x3FC00000}, {"1.e1", 32, 0x41200000}, {"1E+1", 32, 0x41200000},
		{"0.1", 64, 0x3FB999999999999A}, {"nan", 64, 0x7FF8000000000000},
		{"nan:0x8000000000000", 64, 0x7FF8000000000000}, {"-0x1p-1074", 64, 0x8000000000000001},
		{"1_000.5", 64, 0x408F440000000000}, {"1e-400", 64, 0},
		// Hex floats with more mantissa bits than the type holds round to
		// nearest (wat2wasm 1.0.32 truncates these; checked with exact
		// rational arithmetic).
		{"0xA1797a0b.6CE6e6p45", 64, 0x44b42f2f416d9cdd},
		{"0x6AA9CBBDD.Ddf_5bP-6", 64, 0x41baaa72ef7777d7},
		{"+0xf94.fFcB_0603126p+10", 64, 0x414f29ff960c0625},
		{"+0xefCF3bc2BCa6E5P11", 64, 0x441df9e7785794dd},
		{"+0x7F2.15e6", 32, 0x44fe42bd},
		{"0xCFb5cee.", 32, 0x4d4fb5cf},
	} {
		got, err := parseFloat(c.s, c.bits)
		if err != nil || got != c.want {
			t.Errorf("parseFloat(%q, %d) = %#x, %v; want %#x", c.s, c.bits, got, err, c.want)
		}
	}
	for _, s := range []string{"", "-", "1.2.3", "1e", "1e+", "_1", "1_", "1._5", "0x", "0xp1", "nan:0x0", "nan:1", "infinity", "1f", ".5", "0x1p", "1__2"} {
		if _, err := parseFloat(s, 64); err == nil {
			t.Errorf("parseFloat(%q) accepted", s)
		}
	}
}

// TestOutputIsValidated: what Compile accepts, wazero accepts, for inputs
// whose validity depends on typing rather than syntax.
func TestAcceptedModulesCompileInWazero(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	for _, src := range []string{
		`(func (result i32) unreachable)`,
		`(func (result i32) (block (result i32) (br 0 (i32.const 1)) (i32.eqz)))`,
		`(func (param i32) (result i32) (loop (result i32) (br_if 0 (local.get 0)) (i32.const 3)))`,
		`(func (result i64) (return (i64.const 1)) i64.add)`,
		`(type (func (param i32) (result i32))) (func (type 0) (local.get 0) (block (type 0) (param i32) (result i32) nop))`,
	} {
		b := mustCompile(t, src)
		if _, err := rt.CompileModule(ctx, b); err != nil {
			t.Errorf("%s: wazero: %v", src, err)
		}
	}
}

// bigModule is about size bytes of WAT: many functions with long bodies.
func bigModule(size int) []byte {
	var b strings.Builder
	b.WriteString("(module (memory 1)\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "(func $f%d (export \"f%d\") (param $a i32) (result i32) (local $x i64)\n", i, i)
		for j := 0; j < 50; j++ {
			fmt.Fprintf(&b, "  (local.set $a (i32.add (local.get $a) (i32.load offset=%d (i32.const %d))))\n", j*4, j)
		}
		if i > 0 {
			fmt.Fprintf(&b, "  (drop (call $f%d (i32.const 1)))\n", i-1)
		}
		b.WriteString("  (block $b (loop $l (br_if $b (i32.eqz (local.get $a))) (local.set $a (i32.sub (local.get $a) (i32.const 1))) (br $l)))\n  (local.get $a))\n")
	}
	b.WriteString(")")
	return []byte(b.String())
}

func TestLargeModule(t *testing.T) {
	src := bigModule(1 << 20)
	b := mustCompile(t, string(src))
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, b); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkCompile1MiB(b *testing.B) {
	src := bigModule(1 << 20)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Compile(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileNops1MiB is the worst case for memory: one instruction
// per four bytes of text.
func BenchmarkCompileNops1MiB(b *testing.B) {
	src := []byte("(module (func " + strings.Repeat("nop ", 1<<18) + "))")
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(src); err != nil {
			b.Fatal(err)
		}
	}
}
