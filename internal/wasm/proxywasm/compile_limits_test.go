package proxywasm

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/internal/wasm/bound"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm/pwtest"
)

// limitModule is a proxy-wasm module (the test prelude) with extra
// functions: each of branches branches, one block holding a br_table (the
// shape whose compile time grows with the square of its labels).
func limitModule(t testing.TB, branches int64, functions int) []byte {
	t.Helper()
	fn := `(func (block (br_table ` + strings.Repeat("0 ", int(branches-1)) + `(i32.const 0))))`
	return pwtest.Compile(t, `(module`+pwtest.Prelude+strings.Repeat(fn, functions)+`)`)
}

// TestCompileLimits: the module check refuses, before compiling, a module
// with a function over MaxFunctionBranches or a total cost over
// MaxCompileCost, saying which limit; a function at the limit compiles.
func TestCompileLimits(t *testing.T) {
	ctx := context.Background()
	if err := CheckModule(ctx, limitModule(t, MaxFunctionBranches, 1)); err != nil {
		t.Fatalf("a function at the branch limit: %v", err)
	}
	err := CheckModule(ctx, limitModule(t, MaxFunctionBranches+1, 1))
	if err == nil || !strings.Contains(err.Error(), "has "+strconv.Itoa(MaxFunctionBranches+1)+" branches") ||
		!strings.Contains(err.Error(), "the limit is "+strconv.Itoa(MaxFunctionBranches)+" per function") {
		t.Fatalf("a function over the branch limit: %v", err)
	}

	// Functions at the branch limit, each costing about
	// MaxFunctionBranches²: the most that fit the cost limit pass its check
	// (not compiled here: it would take seconds), one more is refused.
	per := int64(MaxFunctionBranches) * (MaxFunctionBranches + 5)
	fit := int(MaxCompileCost / per)
	under := limitModule(t, MaxFunctionBranches, fit)
	c, err := bound.MeasureCompile(under)
	if err != nil || c.Cost > MaxCompileCost || c.Cost+per <= MaxCompileCost {
		t.Fatalf("%d functions: cost %d (%v), limit %d", fit, c.Cost, err, int64(MaxCompileCost))
	}
	if err := bound.CheckCompile(under, bound.CompileLimits{MaxFunctionBranches: MaxFunctionBranches, MaxCost: MaxCompileCost}); err != nil {
		t.Fatalf("%d functions at the branch limit: %v", fit, err)
	}
	err = CheckModule(ctx, limitModule(t, MaxFunctionBranches, fit+1))
	if err == nil || !strings.Contains(err.Error(), "compile cost") || !strings.Contains(err.Error(), "the limit is "+strconv.Itoa(MaxCompileCost)) {
		t.Fatalf("%d functions at the branch limit: %v", fit+1, err)
	}
}

// The watchdog's checkpoints (empty loops the guard adds around every
// call_indirect) are compiled too: a module under the limits as uploaded
// that its checkpoints take over them is refused before anything is
// compiled.
func TestCompileLimitsCountCheckpoints(t *testing.T) {
	calls := MaxFunctionBranches/2 + 1
	wasm := pwtest.Compile(t, `(module`+pwtest.Prelude+`(type $ci (func)) (table 1 funcref) (func `+
		strings.Repeat(`(call_indirect (type $ci) (i32.const 0))`, calls)+`))`)
	if err := bound.CheckCompile(wasm, bound.CompileLimits{MaxFunctionBranches: MaxFunctionBranches, MaxCost: MaxCompileCost}); err != nil {
		t.Fatalf("the module as uploaded: %v", err)
	}
	err := CheckModule(context.Background(), wasm)
	if err == nil || !strings.Contains(err.Error(), "watchdog's checkpoints") || !strings.Contains(err.Error(), "the limit is "+strconv.Itoa(MaxFunctionBranches)+" per function") {
		t.Fatalf("%d call_indirects: %v", calls, err)
	}
}

// BenchmarkCompileAtLimit: compiling one function at the branch limit, in
// the shapes the limit is for (a br_table's labels; sequential ifs, the
// slowest shape found).
func BenchmarkCompileAtLimit(b *testing.B) {
	for name, body := range map[string]string{
		"br_table": `(block (br_table ` + strings.Repeat("0 ", MaxFunctionBranches-1) + `(i32.const 0)))`,
		"ifs":      strings.Repeat(`(if (i32.const 0) (then))`, MaxFunctionBranches),
	} {
		b.Run(name, func(b *testing.B) {
			wasm := pwtest.Compile(b, `(module`+pwtest.Prelude+`(func `+body+`))`)
			for b.Loop() {
				m, err := compile(context.Background(), SHA256(wasm), wasm)
				if err != nil {
					b.Fatal(err)
				}
				_ = m.rt.Close(context.Background())
			}
		})
	}
}
