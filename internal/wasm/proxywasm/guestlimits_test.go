package proxywasm

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/memtest"
	"github.com/caddy-gateway/gateway/internal/poll"
	"github.com/caddy-gateway/gateway/internal/wasm/membudget"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm/pwtest"
)

// The host copies what a module hands it (header names and values,
// metric names, log lines) into the gateway's own heap, where the
// module's 64 MiB memory limit does not reach. These tests hold the host
// to its own bounds: a hostile module must not make one request (or a
// few) allocate gigabytes outside its sandbox.

// guestModule is module() with extra imports (WAT wants imports first).
func guestModule(extra, body string) string {
	return "(module\n" + imports + extra + pwtest.Prelude + logRet + body + "\n)"
}

// requestHeaders runs a GET / exchange on an instance of tp up to its
// request headers callback; the exchange ends when the test does.
func requestHeaders(t *testing.T, tp *testPlugin) (*Instance, *Exchange) {
	t.Helper()
	in, err := tp.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ex := newExchange("GET", "/")
	_ = in.Begin(ex)
	t.Cleanup(func() { _ = in.End(); tp.Put(in) })
	if _, err := in.OnRequestHeaders(true); err != nil {
		t.Fatal(err)
	}
	return in, ex
}

func TestHeaderMapsSetByAModuleAreBounded(t *testing.T) {
	const big = 2 << 20       // 2 MiB
	const quarter = 256 << 10 // four of these (with their names) exceed 1 MiB
	tp := newTestPlugin(t, module(`
  (data (i32.const 1024) "x-big")
  (data (i32.const 1040) "x-ok")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    ;; 80 pages: 2 MiB of 'a' at 131072, a serialized map at 2359296
    (drop (memory.grow (i32.const 78)))
    (memory.fill (i32.const 131072) (i32.const 97) (i32.const `+itoa(big)+`))
    (i32.store (i32.const 2359296) (i32.const 1))
    (i32.store (i32.const 2359300) (i32.const 1))
    (i32.store (i32.const 2359304) (i32.const `+itoa(big)+`))
    (i32.store8 (i32.const 2359308) (i32.const 97))
    (memory.fill (i32.const 2359310) (i32.const 97) (i32.const `+itoa(big)+`))
    ;; one 2 MiB value
    (i32.store (i32.const 600) (call $add_map_value (i32.const 0) (i32.const 1024) (i32.const 5) (i32.const 131072) (i32.const `+itoa(big)+`)))
    ;; 256 KiB values added one by one: the fourth exceeds 1 MiB
    (i32.store (i32.const 604) (call $add_map_value (i32.const 0) (i32.const 1024) (i32.const 5) (i32.const 131072) (i32.const `+itoa(quarter)+`)))
    (i32.store (i32.const 608) (call $add_map_value (i32.const 0) (i32.const 1024) (i32.const 5) (i32.const 131072) (i32.const `+itoa(quarter)+`)))
    (i32.store (i32.const 612) (call $add_map_value (i32.const 0) (i32.const 1024) (i32.const 5) (i32.const 131072) (i32.const `+itoa(quarter)+`)))
    (i32.store (i32.const 616) (call $add_map_value (i32.const 0) (i32.const 1024) (i32.const 5) (i32.const 131072) (i32.const `+itoa(quarter)+`)))
    ;; replacing the three values by one frees room
    (i32.store (i32.const 620) (call $replace_map_value (i32.const 0) (i32.const 1024) (i32.const 5) (i32.const 131072) (i32.const `+itoa(quarter)+`)))
    (i32.store (i32.const 624) (call $add_map_value (i32.const 0) (i32.const 1040) (i32.const 4) (i32.const 131072) (i32.const `+itoa(quarter)+`)))
    ;; a whole map of 2 MiB, and a pseudo-header of 2 MiB
    (i32.store (i32.const 628) (call $set_map_pairs (i32.const 0) (i32.const 2359296) (i32.const `+itoa(12+2+big+1)+`)))
    ;; a local response with 2 MiB of headers
    (i32.store (i32.const 632) (call $send_local (i32.const 403) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 2359296) (i32.const `+itoa(12+2+big+1)+`) (i32.const 0)))
    (i32.const 0))
`), PluginConfig{CallTimeout: time.Minute}) // megabytes are slow under the race detector
	in, ex := requestHeaders(t, tp)
	wantStatuses(t, in, map[uint32]Status{600: StatusBadArgument, 604: StatusOK, 608: StatusOK, 612: StatusOK, 616: StatusBadArgument,
		620: StatusOK, 624: StatusOK, 628: StatusBadArgument, 632: StatusBadArgument})
	if n := len(ex.Request.Header.Values("X-Big")); n != 1 || len(ex.Request.Header.Get("X-Ok")) != quarter {
		t.Errorf("request headers: %d values of X-Big, X-Ok of %d bytes", n, len(ex.Request.Header.Get("X-Ok")))
	}
	if ex.Local != nil {
		t.Error("a local response with 2 MiB of headers was accepted")
	}
}

func TestMetricNamesAreBounded(t *testing.T) {
	tp := newTestPlugin(t, guestModule(`
  (import "env" "proxy_define_metric" (func $define_metric (param i32 i32 i32 i32) (result i32)))
`, `
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (drop (memory.grow (i32.const 16)))
    (memory.fill (i32.const 131072) (i32.const 109) (i32.const 1048576))
    (i32.store (i32.const 600) (call $define_metric (i32.const 0) (i32.const 131072) (i32.const 1048576) (i32.const 700)))
    (i32.store (i32.const 604) (call $define_metric (i32.const 0) (i32.const 131072) (i32.const 4096) (i32.const 704)))
    (i32.const 0))
`), PluginConfig{CallTimeout: time.Minute})
	in, _ := requestHeaders(t, tp)
	wantStatuses(t, in, map[uint32]Status{600: StatusBadArgument, 604: StatusOK})
}

// TestLogOutputPerCallbackIsBounded: a callback logging 3.2 MB (and a
// write of 4 MiB of newlines) logs at most the module's budget a second
// (a call may straddle two seconds), and one summary says how many
// entries were dropped.
func TestLogOutputPerCallbackIsBounded(t *testing.T) {
	tp := newTestPlugin(t, guestModule(`
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
`, `
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (local $i i32)
    (drop (memory.grow (i32.const 64)))
    (memory.fill (i32.const 131072) (i32.const 120) (i32.const 16384))
    ;; 200 messages of 16 KiB
    (loop $l
      (drop (call $log (i32.const 2) (i32.const 131072) (i32.const 16384)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 200))))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    ;; 4 MiB of newlines to stdout in one write
    (memory.fill (i32.const 131072) (i32.const 10) (i32.const 4194304))
    (i32.store (i32.const 700) (i32.const 131072))
    (i32.store (i32.const 704) (i32.const 4194304))
    (drop (call $fd_write (i32.const 1) (i32.const 700) (i32.const 1) (i32.const 708)))
    (i32.const 0))
`), PluginConfig{CallTimeout: time.Minute})
	in, ex := requestHeaders(t, tp)
	logged := 0
	for _, m := range tp.messages() {
		logged += len(m)
	}
	if logged > 2*LogBytesPerSecond {
		t.Errorf("one callback logged %d bytes", logged)
	}
	poll.Until(t, "the summary of the dropped entries", func() bool { return tp.logs.FilterMessageSnippet("log entries dropped").Len() > 0 })
	var dropped int64
	for _, e := range tp.logs.FilterMessageSnippet("log entries dropped").All() {
		dropped += e.ContextMap()["dropped_entries"].(int64)
	}
	if kept := tp.logs.FilterMessage(strings.Repeat("x", MaxLogLine)).Len(); dropped+int64(kept) != 200 {
		t.Errorf("%d entries kept and %d dropped, want 200 in all", kept, dropped)
	}
	// Splitting 4 MiB of newlines into lines must not allocate a slice
	// header per line (96 MiB).
	ex.ResponseStatus = http.StatusOK
	ex.ResponseHeader = http.Header{}
	var err error
	d := memtest.Allocated(func() { _, err = in.OnResponseHeaders(false) })
	if err != nil {
		t.Fatal(err)
	}
	if d > 16<<20 {
		t.Errorf("writing 4 MiB of newlines to stdout allocated %d MiB", d>>20)
	}
}

// TestPoolStaysWithinTheMemoryBudget: instances are charged to the
// plugin's memory budget; beyond it Get fails with ErrMemory, and an
// instance given back while the budget is pressed is closed, not kept.
func TestPoolStaysWithinTheMemoryBudget(t *testing.T) {
	const inst = 2 << 16 // pwtest.Prelude's two pages
	budget := membudget.New(3 * inst)
	tp := newTestPlugin(t, module(""), PluginConfig{Memory: budget})
	if budget.Used() != inst {
		t.Fatalf("after NewPlugin: %d bytes charged, want %d", budget.Used(), inst)
	}
	var held []*Instance
	for i := range 3 {
		in, err := tp.Get(context.Background())
		if err != nil {
			t.Fatalf("Get %d: %v", i, err)
		}
		held = append(held, in)
	}
	if _, err := tp.Get(context.Background()); !errors.Is(err, ErrMemory) {
		t.Fatalf("Get beyond the budget: %v, want ErrMemory", err)
	}
	tp.Put(held[2]) // pressed: 3 of 3 in use
	if budget.Used() != 2*inst || tp.Created() != 3 {
		t.Fatalf("after giving one back while pressed: %d bytes charged, %d created", budget.Used(), tp.Created())
	}
	tp.Put(held[1])
	tp.Put(held[0])
	if budget.Used() != 2*inst {
		t.Fatalf("idle instances: %d bytes charged, want %d", budget.Used(), 2*inst)
	}
	for range 2 { // served by the idle ones
		in, err := tp.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer tp.Put(in)
	}
	if tp.Created() != 3 {
		t.Fatalf("%d instances created, want the idle ones reused", tp.Created())
	}
}
