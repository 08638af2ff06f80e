package bound

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/caddy-gateway/gateway/internal/wasm/internal/wasmtest"
	"github.com/caddy-gateway/gateway/internal/wasm/wat"
)

func TestGuard(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	fanout := "(module\n  (func $f0 (export \"f\") (call $f1) (call $f1) (call $f1) (call $f1))\n"
	for i := 1; i < 30; i++ {
		fanout += "  (func $f" + itoa(i) + " (call $f" + itoa(i+1) + ") (call $f" + itoa(i+1) + ") (call $f" + itoa(i+1) + ") (call $f" + itoa(i+1) + "))\n"
	}
	fanout += "  (func $f30))"
	for _, c := range []struct {
		name, src string
		inserts   int
	}{
		{"straight line", `(module (func (export "f") (param i32) (result i32) (i32.add (local.get 0) (i32.const 1))))`, 0},
		{"loop", `(module (func (export "f") (loop $l (br $l))))`, 0},
		// at the entry and before the end of one function of each cycle
		{"recursion", `(module (func $fib (export "f") (param i32) (result i32)
  (if (result i32) (i32.lt_u (local.get 0) (i32.const 2)) (then (i32.const 1))
    (else (i32.add (call $fib (i32.sub (local.get 0) (i32.const 1))) (call $fib (i32.sub (local.get 0) (i32.const 2))))))))`, 2},
		{"mutual recursion", `(module
  (func $a (export "a") (param i32) (if (local.get 0) (then (call $b (local.get 0)))))
  (func $b (param i32) (call $a (i32.sub (local.get 0) (i32.const 1)))))`, 2},
		// returns and branches out of the function check too
		// entry, return, br_if and br_table to the function, end
		{"exits", `(module (func $f (export "f") (param i32) (result i32)
  (block $b (br_if $b (local.get 0)))
  (if (local.get 0) (then (return (i32.const 1))))
  (drop (br_if 0 (i32.const 2) (local.get 0)))
  (drop (block (result i32) (br_table 0 1 (i32.const 3) (local.get 0))))
  (call $f (local.get 0))))`, 5},
		{"call_indirect", `(module (type $t (func)) (table 1 funcref) (elem (i32.const 0) $f)
  (func $f (export "f") (call_indirect (type $t) (i32.const 0))))`, 2},
		// 4^30 calls without recursion: checks wherever a call tree
		// exceeds the budget
		{"exponential call tree", fanout, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := wat.Compile([]byte(c.src))
			if err != nil {
				t.Fatal(err)
			}
			out, n, err := Guard(b)
			if err != nil {
				t.Fatal(err)
			}
			if c.inserts >= 0 && n != c.inserts || c.inserts < 0 && n == 0 {
				t.Fatalf("%d checkpoints", n)
			}
			if n == 0 && !bytes.Equal(out, b) {
				t.Fatal("changed without checkpoints")
			}
			if len(out) != len(b)+3*n && n < 40 {
				t.Fatalf("%d bytes → %d with %d checkpoints", len(b), len(out), n)
			}
			cm, err := rt.CompileModule(ctx, out)
			if err != nil {
				t.Fatalf("the guarded module is invalid: %v", err)
			}
			_ = cm.Close(ctx)
		})
	}
}

// TestGuardKeepsModulesValid guards every real module the decoder reads
// and requires wazero to accept the result.
func TestGuardKeepsModulesValid(t *testing.T) {
	_, files := wasmtest.Binaries(t, 8, "v1", "v2")
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	guarded, checkpoints := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if cm, err := rt.CompileModule(ctx, b); err != nil {
			continue
		} else {
			_ = cm.Close(ctx)
		}
		out, n, err := Guard(b)
		if err != nil || n == 0 {
			continue
		}
		cm, err := rt.CompileModule(ctx, out)
		if err != nil {
			t.Errorf("%s: guarded (%d checkpoints), wazero refuses it: %v", f, n, err)
			continue
		}
		_ = cm.Close(ctx)
		guarded++
		checkpoints += n
	}
	t.Logf("%d modules guarded with %d checkpoints, all valid", guarded, checkpoints)
	if guarded < 20 {
		t.Fatalf("only %d modules guarded", guarded)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
