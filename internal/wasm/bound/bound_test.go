package bound

import (
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/internal/memtest"
	"github.com/caddy-gateway/gateway/internal/wasm/wasmlimits/hostile"
	"github.com/caddy-gateway/gateway/internal/wasm/wat"
)

var opts = Options{
	MaxInstructions: 10000,
	MaxHeavy:        8,
	Import:          func(mod, name string) bool { return mod == "env" && name != "sleep" },
	Reentry:         []string{"alloc"},
}

func analyze(t *testing.T, src string) Result {
	t.Helper()
	b, err := wat.Compile([]byte(src))
	if err != nil {
		t.Fatalf("assembling: %v", err)
	}
	return Analyze(b, opts)
}

func TestBounded(t *testing.T) {
	r := analyze(t, `(module
  (import "env" "add" (func $add (param i32) (result i32)))
  (memory 1)
  (func (export "alloc") (param i32) (result i32) (drop (memory.grow (i32.const 1))) (i32.const 1024))
  (func $leaf (param i32) (result i32)
    (block $b (result i32)
      (drop (br_if $b (i32.const 1) (local.get 0)))
      (if (result i32) (i32.eqz (local.get 0)) (then (i32.const 1)) (else (i32.const 2)))))
  (func (export "run") (param i32) (result i32)
    (drop (call $leaf (local.get 0)))
    (drop (call $add (call $leaf (local.get 0))))
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 16))
    (block (br_table 0 0 (i32.const 0)))
    (i32.const 0)))`)
	if !r.Bounded {
		t.Fatalf("not bounded: %s", r.Reason)
	}
	// run: its own 17 instructions, $leaf twice (14 each), one host call
	// charged with the allocator (5); heavy: the host call with the
	// allocator's memory.grow, and memory.fill
	if r.Instructions != 17+2*14+5 || r.Heavy != 3 {
		t.Fatalf("bounds %d instructions, %d heavy", r.Instructions, r.Heavy)
	}
}

func TestNotBounded(t *testing.T) {
	for _, tc := range []struct{ name, src, reason string }{
		{"loop", `(module (func (export "f") (loop $l (br $l))))`, "contains a loop"},
		{"loop never taken", `(module (func (export "f") (param i32) (if (local.get 0) (then (loop nop)))))`, "contains a loop"},
		{"recursion", `(module (func $f (export "f") (call $f)))`, "recursive"},
		{"mutual recursion", `(module
  (func $a (export "a") (param i32) (if (local.get 0) (then (call $b (local.get 0)))))
  (func $b (param i32) (call $c (local.get 0)))
  (func $c (param i32) (call $a (i32.sub (local.get 0) (i32.const 1)))))`, "recursive"},
		{"recursion in an unexported function", `(module (func (export "f")) (func $g (call $g)))`, "recursive"},
		{"call_indirect", `(module (type $t (func)) (table 1 funcref) (elem (i32.const 0) $f)
  (func $f (export "f") (call_indirect (type $t) (i32.const 0))))`, "call_indirect"},
		{"exponential call tree", `(module
  (func $f0 (export "f") (call $f1) (call $f1) (call $f1) (call $f1))
  (func $f1 (call $f2) (call $f2) (call $f2) (call $f2))
  (func $f2 (call $f3) (call $f3) (call $f3) (call $f3))
  (func $f3 (call $f4) (call $f4) (call $f4) (call $f4))
  (func $f4 (call $f5) (call $f5) (call $f5) (call $f5))
  (func $f5 (call $f6) (call $f6) (call $f6) (call $f6))
  (func $f6 (call $f7) (call $f7) (call $f7) (call $f7))
  (func $f7))`, "more than 10000 instructions"},
		{"too many heavy operations", `(module (memory 1)
  (func $g (memory.fill (i32.const 0) (i32.const 0) (i32.const 65536)) (memory.fill (i32.const 0) (i32.const 0) (i32.const 65536)))
  (func (export "f") (call $g) (call $g) (call $g) (call $g) (call $g)))`, "more than 8 host calls"},
		{"an unbounded import", `(module (import "env" "sleep" (func $s)) (func (export "f") (call $s)))`, "env.sleep"},
		{"an import of another module", `(module (import "wasi_snapshot_preview1" "poll_oneoff" (func $p)) (func (export "f")))`, "poll_oneoff"},
		{"an allocator calling the host", `(module (import "env" "add" (func $add (param i32) (result i32)))
  (func (export "alloc") (param i32) (result i32) (call $add (local.get 0))))`, "calls the host, which may call it again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := analyze(t, tc.src)
			if r.Bounded || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("bounded %v, reason %q (want %q)", r.Bounded, r.Reason, tc.reason)
			}
		})
	}
}

func TestUnknownInstructions(t *testing.T) {
	// relaxed SIMD (0xfd 0x100..), exception handling (0x06..0x0a), tail
	// calls (0x12): not decoded, so not proven
	for _, body := range [][]byte{
		{0xfd, 0x80, 0x02, 0x0b},
		{0x12, 0x00, 0x0b},
		{0x06, 0x40, 0x0b, 0x0b},
		{0xfc, 0x12, 0x0b},
	} {
		r := Analyze(moduleWithBody(body), opts)
		if r.Bounded || !strings.Contains(r.Reason, errUnknown.Error()) {
			t.Errorf("body % x: bounded %v, reason %q", body, r.Bounded, r.Reason)
		}
	}
}

// moduleWithBody is a module with one function of type () -> () whose
// body (after an empty locals vector) is body.
func moduleWithBody(body []byte) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	b = append(b, 1, 4, 1, 0x60, 0, 0) // type section: () -> ()
	b = append(b, 3, 2, 1, 0)          // function section
	code := append([]byte{1, byte(len(body) + 1), 0}, body...)
	b = append(b, 10, byte(len(code)))
	return append(b, code...)
}

func TestMalformed(t *testing.T) {
	good, err := wat.Compile([]byte(`(module (func (export "f") (drop (i32.const 1))))`))
	if err != nil {
		t.Fatal(err)
	}
	if r := Analyze(good, opts); !r.Bounded {
		t.Fatalf("the intact module is not bounded: %s", r.Reason)
	}
	// every truncation fails cleanly (or is a smaller valid module); one
	// into the code section (the last one here) is never bounded
	code := len(good) - 1
	for ; code > 8 && !(good[code] == 10 && code+2+int(good[code+1]) == len(good)); code-- {
	}
	if code == 8 {
		t.Fatal("no code section at the end")
	}
	for n := 0; n < len(good); n++ {
		r := Analyze(good[:n], opts)
		if n > code && r.Bounded {
			t.Fatalf("truncated to %d bytes: bounded", n)
		}
	}
	// a body whose end is not its last byte
	if r := Analyze(moduleWithBody([]byte{0x0b, 0x01}), opts); r.Bounded {
		t.Fatal("instructions after the end: bounded")
	}
	// an over-long LEB128
	for _, b := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, // 6 bytes
		{0xff, 0xff, 0xff, 0xff, 0x1f},       // over 32 bits
		{0x80, 0x80},                         // truncated
	} {
		r := &reader{b: b}
		if r.u32(); r.err == nil {
			t.Fatalf("% x read as a u32", b)
		}
	}
}

func FuzzAnalyze(f *testing.F) {
	for _, src := range []string{
		`(module (func (export "f") (drop (i32.const 1))))`,
		`(module (memory 1) (func (export "f") (param i32) (result i32) (block (result i32) (br_table 0 0 (i32.const 1) (local.get 0)))))`,
		`(module (func $f (export "f") (call $f)))`,
	} {
		b, err := wat.Compile([]byte(src))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, m := range hostile.Corpus() {
		if len(m.Wasm) < 4096 {
			f.Add(m.Wasm)
		}
	}
	// What one input may make the analysis and the compile measure
	// allocate: in proportion to its size (a function or an import per
	// few bytes), never to a count it declares.
	limit := func(b []byte) uint64 { return 1<<20 + 256*uint64(len(b)) }
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := memtest.Allocated(func() { _ = Analyze(b, opts) }); n > limit(b) {
			t.Fatalf("Analyze allocated %d bytes for %d bytes of input", n, len(b))
		}
		if n := memtest.Allocated(func() { _, _ = MeasureCompile(b) }); n > limit(b) {
			t.Fatalf("MeasureCompile allocated %d bytes for %d bytes of input", n, len(b))
		}
	})
}
