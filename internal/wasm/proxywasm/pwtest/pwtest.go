// Package pwtest holds what the tests of proxy-wasm modules share: the ABI
// boilerplate of the hand-written WAT test modules and their assembly with
// the gateway's own assembler (package wat). Test code only; it is
// exercised by the tests that use it (proxywasm's, the wasm plugin's and
// testgw.MinimalWAT's).
package pwtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/internal/wasm/wat"
)

// Prelude is the ABI boilerplate of a test module, placed after its
// imports: two pages of memory, the ABI version marker, and a bump
// allocator from 65536 (8-byte aligned, growing the memory as needed) that
// starts over when a stream context is created, so a module's requests do
// not exhaust it. Below 65536 the memory is the test's own (scratch at 512,
// data from 1024 by convention).
const Prelude = `
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (i32.and (i32.add (local.get $n) (i32.const 7)) (i32.const -8))))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.const 1) (i32.div_u (local.get $n) (i32.const 65536)))))))
    (local.get $p))
  (func (export "proxy_on_context_create") (param $id i32) (param $parent i32)
    (if (local.get $parent) (then (global.set $heap (i32.const 65536)))))
`

// FaultFn is a test module's function $fault, called at the start of a
// request callback: on a request header X-Fault it traps (t), loops
// forever (l) or grows the memory until that is refused, then traps (m).
// The module imports proxy_get_header_map_value as $get_map_value; the
// function uses data at 1200 and the scratch words at 512 and 516.
const FaultFn = `
  (data (i32.const 1200) "x-fault")
  (func $fault
    (local $c i32)
    (if (i32.ne (call $get_map_value (i32.const 0) (i32.const 1200) (i32.const 7) (i32.const 512) (i32.const 516)) (i32.const 0))
      (then (return)))
    (local.set $c (i32.load8_u (i32.load (i32.const 512))))
    ;; t: trap
    (if (i32.eq (local.get $c) (i32.const 116)) (then unreachable))
    ;; l: loop forever
    (if (i32.eq (local.get $c) (i32.const 108)) (then (loop $l (br $l))))
    ;; m: grow memory until refused, then trap
    (if (i32.eq (local.get $c) (i32.const 109))
      (then (loop $g
        (br_if $g (i32.ne (memory.grow (i32.const 256)) (i32.const -1))))
        unreachable)))
`

// Faults is the body of a test module (after Prelude) that faults as
// FaultFn says and otherwise adds X-Wasm: 1 to the request and the
// response header. It also imports proxy_add_header_map_value as
// $add_map_value and uses data at 1024 and 1040.
const Faults = FaultFn + `
  (data (i32.const 1024) "x-wasm")
  (data (i32.const 1040) "1")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (call $fault)
    (drop (call $add_map_value (i32.const 0) (i32.const 1024) (i32.const 6) (i32.const 1040) (i32.const 1)))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (drop (call $add_map_value (i32.const 2) (i32.const 1024) (i32.const 6) (i32.const 1040) (i32.const 1)))
    (i32.const 0))
`

// Compile assembles a WAT module; a module that does not assemble fails the
// test with its numbered source.
func Compile(t testing.TB, src string) []byte {
	t.Helper()
	b, err := wat.Compile([]byte(src))
	if err != nil {
		t.Fatalf("assembling WAT: %v\n%s", err, numbered(src))
	}
	return b
}

func numbered(src string) string {
	var sb strings.Builder
	for i, l := range strings.Split(src, "\n") {
		fmt.Fprintf(&sb, "%3d %s\n", i+1, l)
	}
	return sb.String()
}
