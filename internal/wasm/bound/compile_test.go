package bound

import (
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/internal/wasm/wat"
)

// brTable is a function body of one block holding a br_table of labels
// labels (its default included): 1 + labels branches, 5 instructions
// (block, i32.const, br_table, the block's end, the function's end).
func brTable(labels int) string {
	return `(func (block (br_table ` + strings.Repeat("0 ", labels) + `(i32.const 0))))`
}

func assemble(t *testing.T, src string) []byte {
	t.Helper()
	b, err := wat.Compile([]byte(src))
	if err != nil {
		t.Fatalf("assembling: %v", err)
	}
	return b
}

// TestMeasureCompile: every block-starting instruction counts once and
// every br_table label (the default too); the cost sums over functions;
// the largest function is named by its index, imports included.
func TestMeasureCompile(t *testing.T) {
	b := assemble(t, `(module (import "env" "f" (func))
  (func (param i32)
    (block (loop (if (local.get 0) (then (br 1)) (else (br_if 2 (local.get 0)))))))
  `+brTable(5)+`)`)
	c, err := MeasureCompile(b)
	if err != nil {
		t.Fatal(err)
	}
	// function 1: block loop if else br br_if = 6 branches; instructions:
	// block loop local.get if br else local.get br_if end end end end = 12
	// function 2: block + 5 labels = 6 branches; block i32.const br_table end end = 5
	if c.MaxBranches != 6 || c.Function != 1 || c.Cost != 6*(6+12)+6*(6+5) {
		t.Fatalf("measure: %+v", c)
	}
}

// TestCheckCompile: a module just within each limit passes, one just over
// is refused with an error saying which limit; a module the decoder cannot
// read is refused.
func TestCheckCompile(t *testing.T) {
	lim := CompileLimits{MaxFunctionBranches: 100, MaxCost: 4 * 100 * (100 + 5)}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"function at the limit", `(module ` + brTable(99) + `)`, ""},
		{"function over the limit", `(module ` + brTable(100) + `)`, "function 0 has 101 branches"},
		{"over the limit after others", `(module ` + brTable(3) + brTable(3) + brTable(100) + `)`, "function 2 has 101 branches (blocks, loops, ifs, elses, br, br_if and br_table labels); the limit is 100 per function"},
		{"cost at the limit", `(module ` + strings.Repeat(brTable(99), 4) + `)`, ""},
		{"cost over the limit", `(module ` + strings.Repeat(brTable(99), 4) + brTable(1) + `)`, "compile cost (the sum over its functions of branches × (branches + instructions)) is 42014; the limit is 42000"},
	} {
		err := CheckCompile(assemble(t, tc.src), lim)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := CheckCompile(moduleWithBody([]byte{0xfd, 0x80, 0x02, 0x0b}), lim); err == nil || !strings.Contains(err.Error(), "beyond WebAssembly 2.0") {
		t.Errorf("a relaxed SIMD body: %v", err)
	}
	// SIMD is measured like any instruction: v128.const, drop, end
	c, err := MeasureCompile(moduleWithBody([]byte{0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a, 0x0b}))
	if err != nil || c.Cost != 0 || c.MaxBranches != 0 {
		t.Errorf("a SIMD body: %+v %v", c, err)
	}
	if err := CheckCompile([]byte("\x00asm"), lim); err == nil || !strings.Contains(err.Error(), "invalid WebAssembly module") {
		t.Errorf("a truncated module: %v", err)
	}
}

// BenchmarkMeasureCompile is the measure's own cost, linear in the module
// (compiling at the limits is benchmarked in proxywasm).
func BenchmarkMeasureCompile(b *testing.B) {
	w, err := wat.Compile([]byte(`(module ` + brTable(100_000) + `)`))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(w)))
	for b.Loop() {
		if _, err := MeasureCompile(w); err != nil {
			b.Fatal(err)
		}
	}
}
