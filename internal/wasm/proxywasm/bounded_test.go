package proxywasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm/pwtest"
)

// headerAdder adds x-wasm: 1 to the request and the response: no loop,
// no recursion, so it is proven bounded and runs without the watchdog.
const headerAdder = `
  (data (i32.const 1024) "x-wasm")
  (data (i32.const 1040) "1")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (drop (call $add_map_value (i32.const 0) (i32.const 1024) (i32.const 6) (i32.const 1040) (i32.const 1)))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (drop (call $add_map_value (i32.const 2) (i32.const 1024) (i32.const 6) (i32.const 1040) (i32.const 1)))
    (i32.const 0))
`

// unusedLoop makes any module unprovable without changing what it does.
const unusedLoop = `
  (func $spin (loop $l (br $l)))
`

func TestWatchdogOnlyWhenNeeded(t *testing.T) {
	bench, err := os.ReadFile("../../../bench/wasm-header.wat")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, wat string
		bounded   bool
		why       string
	}{
		{"header adder", module(headerAdder), true, ""},
		{"the proxy benchmark's module", string(bench), true, ""},
		{"header adder with an unused loop", module(headerAdder + unusedLoop), false, "contains a loop"},
		{"looping", module(faulty), false, "contains a loop"},
		{"recursive", module(`(func $r (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
  (call $r (local.get 0) (local.get 1) (local.get 2)))`), false, "recursive"},
		{"call_indirect", module(`(type $cb (func (param i32 i32 i32) (result i32)))
  (table 1 funcref) (elem (i32.const 0) $h)
  (func $h (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (call_indirect (type $cb) (local.get 0) (local.get 1) (local.get 2) (i32.const 0)))`), false, "call_indirect"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Compile(context.Background(), pwtest.Compile(t, c.wat))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Release()
			if m.Bounded != c.bounded || !strings.Contains(m.Unbounded, c.why) {
				t.Fatalf("bounded %v (%s), want %v (%s)", m.Bounded, m.Unbounded, c.bounded, c.why)
			}
		})
	}
}

// TestUnboundedModulesAreStillCutOff: a module that loops runs with the
// watchdog and is stopped at the time limit; endless recursion, also
// through a table, ends when wazero's stack limit is reached (a trap,
// reported as a timeout when that took longer than the limit); each fails
// its own call and the instance is discarded.
func TestUnboundedModulesAreStillCutOff(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"loop", `(func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
  (loop $l (br $l)) (i32.const 0))`, "did not return within"},
		{"recursion", `(func $r (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
  (call $r (local.get 0) (local.get 1) (local.get 2)))`, "stack overflow|did not return within"},
		{"recursion through a table", `(type $cb (func (param i32 i32 i32) (result i32)))
  (table 1 funcref) (elem (i32.const 0) $h)
  (func $h (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (call_indirect (type $cb) (local.get 0) (local.get 1) (local.get 2) (i32.const 0)))`, "stack overflow|did not return within"},
		// no loop at all: the watchdog sees them through the checkpoints
		// the guard inserts (without, they would run for hours)
		{"recursion without a loop (naive Fibonacci)", `(func $fib (param i32) (result i32)
    (if (result i32) (i32.lt_u (local.get 0) (i32.const 2)) (then (i32.const 1))
      (else (i32.add (call $fib (i32.sub (local.get 0) (i32.const 1))) (call $fib (i32.sub (local.get 0) (i32.const 2)))))))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (drop (call $fib (i32.const 60))) (i32.const 0))`, "did not return within"},
		{"a call tree of 4^30 calls", fanout(30) + `
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (call $f0) (i32.const 0))`, "did not return within"},
		{"a loop reached through a table", `(type $v (func))
  (table 1 funcref) (elem (i32.const 0) $spin)
  (func $spin (loop $l (br $l)))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (call_indirect (type $v) (i32.const 0)) (i32.const 0))`, "did not return within"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := newTestPlugin(t, module(c.body), PluginConfig{Name: c.name, CallTimeout: 100 * time.Millisecond})
			if tp.module.Bounded {
				t.Fatal("proven bounded")
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				expectFailedCall(t, tp, c.want)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the call was not cut off within a minute")
			}
		})
	}
}

// fanout is functions $f0..$f<depth> where each calls the next four times.
func fanout(depth int) string {
	var sb strings.Builder
	for i := 0; i < depth; i++ {
		fmt.Fprintf(&sb, "  (func $f%d (call $f%d) (call $f%d) (call $f%d) (call $f%d))\n", i, i+1, i+1, i+1, i+1)
	}
	fmt.Fprintf(&sb, "  (func $f%d)\n", depth)
	return sb.String()
}

// TestBoundedModulesKeepTheSandbox: without the watchdog, a trap and a
// memory-hungry module still fail only their own call.
func TestBoundedModulesKeepTheSandbox(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"trap", `(func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
  unreachable)`, "unreachable"},
		// 2,000 pages are over the 1,024-page cap: memory.grow refuses
		// (-1) and the module gives up
		{"memory", `(func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
  (if (i32.eq (memory.grow (i32.const 2000)) (i32.const -1)) (then unreachable))
  (i32.const 0))`, "unreachable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := newTestPlugin(t, module(c.body), PluginConfig{Name: c.name})
			if !tp.module.Bounded {
				t.Fatalf("not proven bounded: %s", tp.module.Unbounded)
			}
			expectFailedCall(t, tp, c.want)
		})
	}
}

// expectFailedCall runs a request whose header callback must fail with an
// error containing one of the |-separated wants.
func expectFailedCall(t *testing.T, tp *testPlugin, want string) {
	t.Helper()
	in, err := tp.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Begin(newExchange("GET", "/")); err != nil {
		t.Fatal(err)
	}
	_, err = in.OnRequestHeaders(true)
	var ce *CallError
	matched := false
	for _, w := range strings.Split(want, "|") {
		matched = matched || err != nil && strings.Contains(err.Error(), w)
	}
	if !errors.As(err, &ce) || ce.Callback != "proxy_on_request_headers" || !matched {
		t.Fatalf("got %v, want a failed proxy_on_request_headers containing %q", err, want)
	}
	if in.End() == nil || in.Failed() == nil {
		t.Fatal("the failed instance is still usable")
	}
	created := tp.Created()
	tp.Put(in)
	// the next request gets a fresh instance, which fails the same way
	in, err = tp.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Put(in)
	if tp.Created() != created+1 {
		t.Fatalf("created %d → %d: the failed instance was reused?", created, tp.Created())
	}
}

// TestPoolKeepsInstancesForConcurrentRequests: as many instances as
// requests were in flight stay pooled, so the next burst of that size
// instantiates nothing.
func TestPoolKeepsInstancesForConcurrentRequests(t *testing.T) {
	tp := newTestPlugin(t, module(headerAdder), PluginConfig{})
	burst := func() {
		var ins []*Instance
		for i := 0; i < 48; i++ {
			in, err := tp.Get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ins = append(ins, in)
		}
		for _, in := range ins {
			tp.Put(in)
		}
	}
	burst()
	created := tp.Created()
	for i := 0; i < 3; i++ {
		burst()
	}
	if tp.Created() != created {
		t.Fatalf("%d instances created by bursts of 48 after the first", tp.Created()-created)
	}
}
