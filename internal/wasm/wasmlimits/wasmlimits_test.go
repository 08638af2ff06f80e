package wasmlimits

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/caddy-gateway/gateway/internal/memtest"
	"github.com/caddy-gateway/gateway/internal/wasm/bound"
	"github.com/caddy-gateway/gateway/internal/wasm/internal/wasmtest"
	"github.com/caddy-gateway/gateway/internal/wasm/wasmlimits/hostile"
	"github.com/caddy-gateway/gateway/internal/wasm/wat"
)

var compileLimits = bound.CompileLimits{MaxFunctionBranches: 20_000, MaxCost: 2_000_000_000}

// gateway are the limits the gateway checks (proxywasm.DeclaredLimits):
// memories of at most 1024 pages.
var gateway = func() Limits {
	l := Default
	l.MaxMemoryPages = 1024
	return l
}()

// maxCheckAlloc is what checking one module may allocate, whatever it
// declares: the errors' text.
const maxCheckAlloc = 64 << 10

// TestHostileCorpus: every module of the corpus is refused before the
// runtime sees it, allocating next to nothing; without the check each of
// the count cases makes wazero's decoder allocate gigabytes.
func TestHostileCorpus(t *testing.T) {
	for _, m := range hostile.Corpus() {
		var err error
		n := memtest.Allocated(func() { err = Check(m.Wasm, gateway) })
		if n > maxCheckAlloc {
			t.Errorf("%s: Check allocated %d bytes", m.Name, n)
		}
		if err == nil {
			// instruction-level cases: package bound refuses them
			if err = bound.CheckCompile(m.Wasm, compileLimits); err == nil {
				t.Errorf("%s: accepted", m.Name)
				continue
			}
		}
		t.Logf("%s: %v", m.Name, err)
	}
}

func TestLimitsNamed(t *testing.T) {
	for name, want := range map[string]string{
		"locals 2^32-1":                         "the limit is 50000 per function",
		"locals 40000 in each of 100 functions": "the limit is 1000000 for the module",
		"function names 2^32-1":                 "4294967295 function names declared; the limit is 500000",
		"table of 2^32-1 elements":              "the limit is 100000",
		"2000 custom sections":                  "1001 custom sections declared; the limit is 1000",
		"data segments 2^32-1":                  "the limit is 100000",
		"overlapping sections":                  "code section: 4 bytes left over", // its size cuts the next section
		"section size beyond the module":        "truncated or overlapping sections",
	} {
		var wasm []byte
		for _, m := range hostile.Corpus() {
			if m.Name == name {
				wasm = m.Wasm
			}
		}
		if err := Check(wasm, gateway); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

// TestCompilerOutputPasses: the modules of real compilers (TinyGo, Rust,
// Zig, Emscripten, Go) wazero ships as test data pass the default limits,
// as do the spec tests' modules the runtime accepts (but for tables and
// memories beyond them).
func TestCompilerOutputPasses(t *testing.T) {
	_, files := wasmtest.Binaries(t, 1, "v1", "v2")
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cm, err := rt.CompileModule(ctx, b)
		if err != nil {
			continue
		}
		cm.Close(ctx)
		checked++
		if err := Check(b, Default); err != nil {
			if strings.Contains(f, "spectest") && (strings.Contains(err.Error(), "table of") || strings.Contains(err.Error(), "memor")) {
				continue
			}
			t.Errorf("%s: %v", f, err)
		}
	}
	if checked < 50 {
		t.Fatalf("only %d modules checked", checked)
	}
}

// TestAtTheLimits: a module at every count limit passes; one more is
// refused.
func TestAtTheLimits(t *testing.T) {
	l := Default
	l.MaxLocalsPerFunction, l.MaxLocals, l.MaxFunctions, l.MaxNames = 3, 5, 3, 4
	src := `(module
  (func $a (local i32 i32 i32))
  (func $b (local i64 i64))
  (func $c))`
	b, err := wat.Compile([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(b, l); err != nil {
		t.Fatal(err)
	}
	for field, p := range map[string]*uint64{"MaxLocalsPerFunction": &l.MaxLocalsPerFunction, "MaxLocals": &l.MaxLocals, "MaxFunctions": &l.MaxFunctions} {
		*p--
		if err := Check(b, l); err == nil {
			t.Errorf("%s one below: accepted", field)
		}
		*p++
	}
	names := append(append([]byte{}, b...), hostile.Section(0, hostile.Name("name"), []byte{1},
		hostile.Uleb(10), hostile.Uleb(3), []byte{0}, hostile.Name("a"), []byte{1}, hostile.Name("b"), []byte{2}, hostile.Name("c"))...)
	if err := Check(names, l); err != nil {
		t.Fatal(err)
	}
	l.MaxNames = 2
	if err := Check(names, l); err == nil {
		t.Error("3 names with a limit of 2: accepted")
	}
}

// maxCompileAlloc is what the runtime may allocate compiling one module
// that passes the checks, for the small inputs a fuzzer makes.
const maxCompileAlloc = 256 << 20

// FuzzCheck: no input makes Check allocate more than maxCheckAlloc, and
// whatever passes the gateway's checks, the runtime compiles within
// maxCompileAlloc.
//
//	go test -run '^$' -fuzz FuzzCheck -fuzztime 60s ./internal/wasm/wasmlimits/
func FuzzCheck(f *testing.F) {
	for _, m := range hostile.Corpus() {
		if len(m.Wasm) < 4096 {
			f.Add(m.Wasm)
		}
	}
	for _, src := range []string{
		`(module (memory 1) (func (export "f") (param i32) (result i32) (local i64 f32) (block (result i32) (br_table 0 0 (i32.const 1) (local.get 0)))) (data (i32.const 0) "a"))`,
		`(module (type (func (param i32))) (import "env" "f" (func (type 0))) (table 2 funcref) (elem (i32.const 0) func 0) (global (mut i32) (i32.const 1)) (export "g" (global 0)))`,
	} {
		b, err := wat.Compile([]byte(src))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, b []byte) {
		var err error
		if n := memtest.Allocated(func() { err = Check(b, Default) }); n > maxCheckAlloc {
			t.Fatalf("Check allocated %d bytes for % x", n, b)
		}
		if err != nil || bound.CheckCompile(b, compileLimits) != nil {
			return
		}
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(1024))
		defer rt.Close(ctx)
		n := memtest.Allocated(func() {
			if cm, err := rt.CompileModule(ctx, b); err == nil {
				cm.Close(ctx)
			}
		})
		if n > maxCompileAlloc+uint64(256*len(b)) {
			t.Fatalf("compiling allocated %d bytes for % x", n, bytes.TrimSpace(b))
		}
	})
}
