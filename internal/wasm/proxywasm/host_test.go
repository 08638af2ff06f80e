package proxywasm

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/caddy-gateway/gateway/internal/poll"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm/pwtest"
)

func TestCheckModule(t *testing.T) {
	valid := module("")
	if err := CheckModule(context.Background(), pwtest.Compile(t, valid)); err != nil {
		t.Fatalf("valid module: %v", err)
	}
	cases := []struct{ name, wat, want string }{
		{"no memory", `(module (func (export "proxy_abi_version_0_2_1")) (func (export "malloc") (param i32) (result i32) (i32.const 0)) (func (export "proxy_on_context_create") (param i32 i32)))`, `export its linear memory as "memory"`},
		{"no abi marker", `(module (memory (export "memory") 1) (func (export "malloc") (param i32) (result i32) (i32.const 0)) (func (export "proxy_on_context_create") (param i32 i32)))`, "no proxy-wasm ABI version marker"},
		{"abi 0.1.0", `(module (memory (export "memory") 1) (func (export "proxy_abi_version_0_1_0")))`, "ABI 0.1.0, which is not supported"},
		{"no allocator", `(module (memory (export "memory") 1) (func (export "proxy_abi_version_0_2_0")) (func (export "proxy_on_context_create") (param i32 i32)))`, "no allocator"},
		{"no context create", `(module (memory (export "memory") 1) (func (export "proxy_abi_version_0_2_0")) (func (export "malloc") (param i32) (result i32) (i32.const 0)))`, "proxy_on_context_create"},
		{"foreign import module", `(module (import "foo" "bar" (func)) (memory (export "memory") 1) (func (export "proxy_abi_version_0_2_0")) (func (export "malloc") (param i32) (result i32) (i32.const 0)) (func (export "proxy_on_context_create") (param i32 i32)))`, "imports foo.bar"},
		{"unknown env import", `(module (import "env" "getrandom_thing" (func (param i32))) (memory (export "memory") 1) (func (export "proxy_abi_version_0_2_0")) (func (export "malloc") (param i32) (result i32) (i32.const 0)) (func (export "proxy_on_context_create") (param i32 i32)))`, "env.getrandom_thing(i32)->()"},
		{"wrong import signature", `(module (import "env" "proxy_log" (func (param i32 i32) (result i32))) (memory (export "memory") 1) (func (export "proxy_abi_version_0_2_0")) (func (export "malloc") (param i32) (result i32) (i32.const 0)) (func (export "proxy_on_context_create") (param i32 i32)))`, "env.proxy_log with signature (i32,i32)->(i32), the proxy-wasm ABI's is (i32,i32,i32)->(i32)"},
		{"wrong callback signature", `(module (memory (export "memory") 1) (func (export "proxy_abi_version_0_2_0")) (func (export "malloc") (param i32) (result i32) (i32.const 0)) (func (export "proxy_on_context_create") (param i32 i32)) (func (export "proxy_on_request_headers") (param i32 i32) (result i32) (i32.const 0)))`, "proxy_on_request_headers has signature (i32,i32)->(i32)"},
		{"memory over the limit", `(module (memory (export "memory") 2000) (func (export "proxy_abi_version_0_2_0")) (func (export "malloc") (param i32) (result i32) (i32.const 0)) (func (export "proxy_on_context_create") (param i32 i32)))`, "memory"},
		{"vm start refused", `(module (memory (export "memory") 1) (func (export "proxy_abi_version_0_2_0")) (func (export "malloc") (param i32) (result i32) (i32.const 0)) (func (export "proxy_on_context_create") (param i32 i32)) (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 0)))`, "proxy_on_vm_start returned false"},
		{"start traps", `(module (memory (export "memory") 1) (func (export "proxy_abi_version_0_2_0")) (func (export "malloc") (param i32) (result i32) (i32.const 0)) (func (export "proxy_on_context_create") (param i32 i32)) (func (export "_initialize") unreachable))`, "_initialize: wasm error: unreachable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckModule(context.Background(), pwtest.Compile(t, c.wat))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	if err := CheckModule(context.Background(), []byte("\x00asm garbage")); err == nil || !strings.Contains(err.Error(), "invalid WebAssembly module") {
		t.Fatalf("garbage: %v", err)
	}
}

func TestSources(t *testing.T) {
	b := []byte("some module bytes")
	sha := PutSource(b)
	if sha != SHA256(b) || len(sha) != 64 {
		t.Fatalf("sha %q", sha)
	}
	b[0] = 'X' // the registry keeps its own copy
	got, ok := Source(sha)
	if !ok || string(got) != "some module bytes" {
		t.Fatalf("Source = %q, %v", got, ok)
	}
	if PutSource([]byte("some module bytes")) != sha {
		t.Fatal("same bytes, other key")
	}
	DropSource(sha)
	if _, ok := Source(sha); ok {
		t.Fatal("dropped source still there")
	}
}

func TestCompileCacheShared(t *testing.T) {
	wasm := pwtest.Compile(t, module(""))
	m1, err := Compile(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Compile(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	if m1 != m2 {
		t.Fatal("same bytes compiled twice")
	}
	m1.Release()
	m2.Release()
	m3, err := Compile(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer m3.Release()
	if m3 != m1 {
		t.Fatal("released module not kept for the grace period")
	}
}

const headerData = `
  (data (i32.const 1024) "x-in")
  (data (i32.const 1040) "x-added")
  (data (i32.const 1056) "yes")
  (data (i32.const 1072) "x-rep")
  (data (i32.const 1088) "new")
  (data (i32.const 1104) "x-del")
  (data (i32.const 1120) ":path")
  (data (i32.const 1136) "/rewritten?q=1")
  (data (i32.const 1152) ":status")
  (data (i32.const 1168) "201")
  (data (i32.const 1184) "x-resp")
  (data (i32.const 1200) "bad\0aname")
  (data (i32.const 1216) "x-missing")
`

func TestHeaderOps(t *testing.T) {
	tp := newTestPlugin(t, module(headerData+`
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (i32.store (i32.const 600) (local.get $n))
    (i32.store (i32.const 604) (call $get_map_value (i32.const 0) (i32.const 1024) (i32.const 4) (i32.const 512) (i32.const 516)))
    (call $log_ret (i32.const 2))
    (i32.store (i32.const 608) (call $add_map_value (i32.const 0) (i32.const 1040) (i32.const 7) (i32.const 1056) (i32.const 3)))
    (i32.store (i32.const 612) (call $replace_map_value (i32.const 0) (i32.const 1072) (i32.const 5) (i32.const 1088) (i32.const 3)))
    (i32.store (i32.const 616) (call $remove_map_value (i32.const 0) (i32.const 1104) (i32.const 5)))
    (i32.store (i32.const 620) (call $replace_map_value (i32.const 0) (i32.const 1120) (i32.const 5) (i32.const 1136) (i32.const 14)))
    ;; an invalid name is refused
    (i32.store (i32.const 624) (call $add_map_value (i32.const 0) (i32.const 1200) (i32.const 8) (i32.const 1056) (i32.const 3)))
    (i32.store (i32.const 628) (call $get_map_value (i32.const 0) (i32.const 1216) (i32.const 9) (i32.const 512) (i32.const 516)))
    ;; response headers are not there yet
    (i32.store (i32.const 632) (call $get_map_value (i32.const 2) (i32.const 1184) (i32.const 6) (i32.const 512) (i32.const 516)))
    (i32.store (i32.const 636) (call $get_map_value (i32.const 99) (i32.const 1184) (i32.const 6) (i32.const 512) (i32.const 516)))
    (drop (call $get_map_pairs (i32.const 0) (i32.const 512) (i32.const 516)))
    (call $log_ret (i32.const 2))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (i32.store (i32.const 640) (call $add_map_value (i32.const 2) (i32.const 1184) (i32.const 6) (i32.const 1056) (i32.const 3)))
    (i32.store (i32.const 644) (call $replace_map_value (i32.const 2) (i32.const 1152) (i32.const 7) (i32.const 1168) (i32.const 3)))
    ;; request headers are read-only now
    (i32.store (i32.const 648) (call $add_map_value (i32.const 0) (i32.const 1040) (i32.const 7) (i32.const 1056) (i32.const 3)))
    (i32.const 0))
`), PluginConfig{Name: "hdr"})
	in, err := tp.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Put(in)
	ex := newExchange("GET", "/orig?a=b", "X-In", "hello", "X-Rep", "old", "X-Del", "gone")
	if err := exchange(in, ex); err != nil {
		t.Fatal(err)
	}
	mem := func(addr uint32) uint32 { v, _ := in.mem.ReadUint32Le(addr); return v }
	if n := mem(600); n != 7 { // 4 pseudo-headers + 3
		t.Errorf("num_headers = %d", n)
	}
	wantStatuses(t, in, map[uint32]Status{604: StatusOK, 608: StatusOK, 612: StatusOK, 616: StatusOK, 620: StatusOK, 624: StatusBadArgument, 628: StatusNotFound, 632: StatusNotFound, 636: StatusBadArgument, 640: StatusOK, 644: StatusOK, 648: StatusBadArgument})
	r := ex.Request
	if r.Header.Get("X-Added") != "yes" || r.Header.Get("X-Rep") != "new" || r.Header.Get("X-Del") != "" {
		t.Errorf("request headers %v", r.Header)
	}
	if r.URL.Path != "/rewritten" || r.URL.RawQuery != "q=1" {
		t.Errorf("path %q query %q", r.URL.Path, r.URL.RawQuery)
	}
	if ex.ResponseStatus != 201 || ex.ResponseHeader.Get("X-Resp") != "yes" {
		t.Errorf("response %d %v", ex.ResponseStatus, ex.ResponseHeader)
	}
	msgs := tp.messages()
	if len(msgs) != 2 || msgs[0] != "hello" {
		t.Fatalf("logs %q", msgs)
	}
	ps, ok := deserializePairs([]byte(msgs[1]))
	if !ok {
		t.Fatalf("pairs not deserializable: %q", msgs[1])
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.k] = p.v
	}
	if got[":method"] != "GET" || got[":path"] != "/rewritten?q=1" || got[":authority"] != "example.com" || got["x-added"] != "yes" || got["x-in"] != "hello" {
		t.Fatalf("pairs %v", got)
	}
}

func TestSetHeaderMapPairs(t *testing.T) {
	m := serializePairs([]pair{{":path", "/set"}, {"x-a", "1"}, {"x-b", "2"}, {"x-b", "3"}})
	bad := serializePairs([]pair{{"x-ok", "1"}, {"x bad", "2"}})
	tp := newTestPlugin(t, module(`
  (data (i32.const 2048) `+wdata(m)+`)
  (data (i32.const 4096) `+wdata(bad)+`)
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (i32.store (i32.const 600) (call $set_map_pairs (i32.const 0) (i32.const 4096) (i32.const `+itoa(len(bad))+`)))
    (i32.store (i32.const 604) (call $set_map_pairs (i32.const 0) (i32.const 2048) (i32.const `+itoa(len(m))+`)))
    (i32.store (i32.const 608) (call $set_map_pairs (i32.const 0) (i32.const 2048) (i32.const 7)))
    (i32.const 0))
`), PluginConfig{})
	ex := newExchange("GET", "/x", "X-Old", "1")
	if err := tp.run(t, ex); err != nil {
		t.Fatal(err)
	}
	h := ex.Request.Header
	if len(h) != 2 || h.Get("X-A") != "1" || strings.Join(h.Values("X-B"), ",") != "2,3" || ex.Request.URL.Path != "/set" {
		t.Fatalf("headers %v path %s", h, ex.Request.URL.Path)
	}
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int) string {
	b := make([]byte, 0, 8)
	b = binary.AppendUvarint(b[:0], 0)[:0]
	if n == 0 {
		return "0"
	}
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func TestLocalResponse(t *testing.T) {
	hdr := serializePairs([]pair{{"x-deny", "yes"}, {"content-type", "text/plain"}})
	tp := newTestPlugin(t, module(`
  (data (i32.const 1024) "denied")
  (data (i32.const 1040) "go away")
  (data (i32.const 2048) `+wdata(hdr)+`)
  (data (i32.const 3072) `+wdata(serializePairs([]pair{{"bad\r\nname", "x"}}))+`)
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (i32.store (i32.const 600) (call $send_local (i32.const 99) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
    (i32.store (i32.const 604) (call $send_local (i32.const 403) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 3072) (i32.const 40) (i32.const 0)))
    (i32.store (i32.const 608) (call $send_local (i32.const 403) (i32.const 1024) (i32.const 6) (i32.const 1040) (i32.const 7) (i32.const 2048) (i32.const `+itoa(len(hdr))+`) (i32.const 0)))
    (i32.const 1))
`), PluginConfig{})
	in, _ := tp.Get(context.Background())
	defer tp.Put(in)
	ex := newExchange("GET", "/")
	_ = in.Begin(ex)
	act, err := in.OnRequestHeaders(true)
	if err != nil || act != ActionPause {
		t.Fatalf("action %v err %v", act, err)
	}
	l := ex.Local
	if l == nil || l.Status != 403 || string(l.Body) != "go away" || l.Details != "denied" || l.Header.Get("X-Deny") != "yes" {
		t.Fatalf("local response %+v", l)
	}
	for addr, want := range map[uint32]Status{600: StatusBadArgument, 608: StatusOK} {
		if v, _ := in.mem.ReadUint32Le(addr); Status(v) != want {
			t.Errorf("status at %d = %d, want %d", addr, v, want)
		}
	}
	if v, _ := in.mem.ReadUint32Le(604); Status(v) == StatusOK {
		t.Error("a local response with an invalid header name was accepted")
	}
	_ = in.End()
}

func TestLogLevels(t *testing.T) {
	tp := newTestPlugin(t, module(`
  (data (i32.const 1024) "msg")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (local $i i32)
    (loop $l
      (i32.store (i32.add (i32.const 600) (i32.mul (local.get $i) (i32.const 4)))
        (call $log (local.get $i) (i32.const 1024) (i32.const 3)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 7))))
    ;; out-of-bounds message
    (i32.store (i32.const 640) (call $log (i32.const 2) (i32.const 200000) (i32.const 3)))
    (i32.store (i32.const 644) (call $get_log_level (i32.const 648)))
    (i32.store (i32.const 652) (call $now (i32.const 656)))
    (i32.const 0))
`), PluginConfig{})
	in, _ := tp.Get(context.Background())
	defer tp.Put(in)
	_ = in.Begin(newExchange("GET", "/"))
	if _, err := in.OnRequestHeaders(true); err != nil {
		t.Fatal(err)
	}
	var levels []string
	for _, e := range tp.logs.All() {
		levels = append(levels, e.Level.String())
	}
	if got := strings.Join(levels, ","); got != "debug,debug,info,warn,error,error" {
		t.Fatalf("levels %s", got)
	}
	for i := uint32(0); i < 6; i++ {
		if v, _ := in.mem.ReadUint32Le(600 + 4*i); v != 0 {
			t.Errorf("level %d: status %d", i, v)
		}
	}
	st := func(a uint32) Status { v, _ := in.mem.ReadUint32Le(a); return Status(v) }
	if st(624) != StatusBadArgument || st(640) != StatusInvalidMemoryAccess || st(644) != StatusOK || st(652) != StatusOK {
		t.Errorf("statuses %d %d %d %d", st(624), st(640), st(644), st(652))
	}
	if lvl, _ := in.mem.ReadUint32Le(648); lvl != 0 {
		t.Errorf("log level %d, want trace (debug enabled)", lvl)
	}
	now, _ := in.mem.ReadUint64Le(656)
	if d := time.Since(time.Unix(0, int64(now))); d < 0 || d > time.Minute {
		t.Errorf("time %d", now)
	}
	_ = in.End()
}

func TestProperties(t *testing.T) {
	props := []string{"request\x00path", "request\x00url_path", "request\x00method", "request\x00host", "request\x00scheme",
		"request\x00protocol", "request\x00id", "request\x00headers\x00x-a", "source\x00address", "source\x00port",
		"plugin_name", "plugin_root_id", "plugin_vm_id", "request.method\x00", "response\x00code", "nope\x00nope"}
	body := ""
	for i, p := range props {
		addr := 2048 + 64*i
		body += "  (data (i32.const " + itoa(addr) + ") " + wdata([]byte(p)) + ")\n"
	}
	body += `  (func $props (param $base i32)
    (local $i i32)
    (loop $l
      (i32.store (i32.add (local.get $base) (i32.mul (local.get $i) (i32.const 4)))
        (call $get_property (i32.add (i32.const 2048) (i32.mul (local.get $i) (i32.const 64))) (i32.load (i32.add (i32.const 8192) (i32.mul (local.get $i) (i32.const 4)))) (i32.const 512) (i32.const 516)))
      (if (i32.eqz (i32.load (i32.add (local.get $base) (i32.mul (local.get $i) (i32.const 4))))) (then (call $log_ret (i32.const 2))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const ` + itoa(len(props)) + `)))))
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (call $props (i32.const 600)) (i32.const 0))
`
	lens := make([]byte, 0, 4*len(props))
	for _, p := range props {
		lens = binary.LittleEndian.AppendUint32(lens, uint32(len(p)))
	}
	body += "  (data (i32.const 8192) " + wdata(lens) + ")\n"
	tp := newTestPlugin(t, module(body), PluginConfig{Name: "props-plugin", VMID: "props-vm"})
	in, _ := tp.Get(context.Background())
	defer tp.Put(in)
	ex := newExchange("POST", "/p/a%20th?x=1", "X-A", "va")
	ex.RequestID = "rid-1"
	_ = in.Begin(ex)
	if _, err := in.OnRequestHeaders(true); err != nil {
		t.Fatal(err)
	}
	port := string(int64Bytes(1234))
	want := []string{"/p/a%20th?x=1", "/p/a%20th", "POST", "example.com", "http", "HTTP/1.1", "rid-1", "va", "192.0.2.1:1234", port,
		"props-plugin", "", "props-vm", "POST"}
	if got := tp.messages(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("properties\n got %q\nwant %q", got, want)
	}
	for i, wantSt := range map[int]Status{14: StatusNotFound, 15: StatusNotFound} {
		if v, _ := in.mem.ReadUint32Le(uint32(600 + 4*i)); Status(v) != wantSt {
			t.Errorf("property %q: status %d", props[i], v)
		}
	}
	_ = in.End()
}

func TestSharedDataCAS(t *testing.T) {
	wat := module(`
  (data (i32.const 1024) "k")
  (data (i32.const 1040) "v1")
  (data (i32.const 1056) "v2")
  (data (i32.const 1072) "v3")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (i32.store (i32.const 600) (call $set_shared (i32.const 1024) (i32.const 1) (i32.const 1040) (i32.const 2) (i32.const 0)))
    (i32.store (i32.const 604) (call $get_shared (i32.const 1024) (i32.const 1) (i32.const 512) (i32.const 516) (i32.const 700)))
    (i32.store (i32.const 608) (call $set_shared (i32.const 1024) (i32.const 1) (i32.const 1056) (i32.const 2) (i32.load (i32.const 700))))
    (i32.store (i32.const 612) (call $set_shared (i32.const 1024) (i32.const 1) (i32.const 1072) (i32.const 2) (i32.load (i32.const 700))))
    (i32.store (i32.const 616) (call $get_shared (i32.const 1024) (i32.const 1) (i32.const 512) (i32.const 516) (i32.const 704)))
    (call $log_ret (i32.const 2))
    (i32.store (i32.const 620) (call $get_shared (i32.const 1040) (i32.const 2) (i32.const 512) (i32.const 516) (i32.const 704)))
    (i32.const 0))
`)
	tp := newTestPlugin(t, wat, PluginConfig{VMID: "cas-test"})
	in, _ := tp.Get(context.Background())
	_ = in.Begin(newExchange("GET", "/"))
	if _, err := in.OnRequestHeaders(true); err != nil {
		t.Fatal(err)
	}
	wantStatuses(t, in, map[uint32]Status{600: StatusOK, 604: StatusOK, 608: StatusOK, 612: StatusCASMismatch, 616: StatusOK, 620: StatusNotFound})
	if m := tp.messages(); len(m) != 1 || m[0] != "v2" {
		t.Fatalf("value %q", m)
	}
	_ = in.End()
	tp.Put(in)

	// another plugin (another module, same VM id) sees the same store
	other := newTestPlugin(t, module(`
  (data (i32.const 1024) "k")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (drop (call $get_shared (i32.const 1024) (i32.const 1) (i32.const 512) (i32.const 516) (i32.const 700)))
    (call $log_ret (i32.const 2))
    (i32.const 0))
  (func $unused)
`), PluginConfig{VMID: "cas-test"})
	if err := other.run(t, newExchange("GET", "/")); err != nil {
		t.Fatal(err)
	}
	if m := other.messages(); len(m) != 1 || m[0] != "v2" {
		t.Fatalf("other plugin sees %q", m)
	}
}

// TestSharedDataLivesWhileUsed: a VM id's shared data outlives the plugin
// that wrote it as long as another plugin of that VM id runs (a reload:
// the new config's plugin starts before the old one closes), and is freed
// with the last one (a deleted module's data does not stay in memory).
func TestSharedDataLivesWhileUsed(t *testing.T) {
	wat := module(``)
	old := newTestPlugin(t, wat, PluginConfig{VMID: "lifetime"})
	if st := old.shared.set([]byte("k"), []byte("v"), 0); st != StatusOK {
		t.Fatalf("set: status %d", st)
	}
	next := newTestPlugin(t, wat, PluginConfig{VMID: "lifetime"})
	old.Close()
	if v, _, ok := next.shared.get([]byte("k")); !ok || string(v) != "v" {
		t.Fatalf("after the old plugin closed: %q %v", v, ok)
	}
	next.Close()
	later := newTestPlugin(t, wat, PluginConfig{VMID: "lifetime"})
	if v, _, ok := later.shared.get([]byte("k")); ok {
		t.Fatalf("the data of a VM id no plugin used was kept: %q", v)
	}
}

func TestTicks(t *testing.T) {
	tp := newTestPlugin(t, module(`
  (data (i32.const 1024) "tick")
  (func (export "proxy_on_configure") (param $root i32) (param $size i32) (result i32)
    (drop (call $set_tick (i32.const 5))) (i32.const 1))
  (func (export "proxy_on_tick") (param $root i32)
    (drop (call $log (i32.const 2) (i32.const 1024) (i32.const 4))))
`), PluginConfig{})
	poll.Until(t, "3 ticks", func() bool { return tp.logs.FilterMessage("tick").Len() >= 3 })
	// requests are served by other instances than the ticking one
	if err := tp.run(t, newExchange("GET", "/")); err != nil {
		t.Fatal(err)
	}
	tp.Close()
	n := tp.logs.FilterMessage("tick").Len()
	time.Sleep(30 * time.Millisecond)
	if m := tp.logs.FilterMessage("tick").Len(); m != n {
		t.Fatalf("ticks after Close: %d → %d", n, m)
	}
}

func TestEffectiveContextAndConfig(t *testing.T) {
	tp := newTestPlugin(t, module(`
  (func (export "proxy_on_configure") (param $root i32) (param $size i32) (result i32)
    (drop (call $get_buffer (i32.const 7) (i32.const 0) (local.get $size) (i32.const 512) (i32.const 516)))
    (call $log_ret (i32.const 2))
    (i32.ne (local.get $size) (i32.const 0)))
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (i32.store (i32.const 600) (call $set_effective (i32.const 1)))
    (i32.store (i32.const 604) (call $set_effective (local.get $ctx)))
    (i32.store (i32.const 608) (call $set_effective (i32.const 999)))
    (i32.store (i32.const 612) (call $get_buffer (i32.const 7) (i32.const 2) (i32.const 100) (i32.const 512) (i32.const 516)))
    (call $log_ret (i32.const 2))
    (i32.store (i32.const 616) (call $get_buffer (i32.const 0) (i32.const 0) (i32.const 100) (i32.const 512) (i32.const 516)))
    (i32.store (i32.const 620) (call $get_buffer (i32.const 42) (i32.const 0) (i32.const 100) (i32.const 512) (i32.const 516)))
    (i32.store (i32.const 624) (call $get_buffer (i32.const 7) (i32.const 50) (i32.const 100) (i32.const 512) (i32.const 516)))
    (i32.const 0))
`), PluginConfig{Configuration: []byte(`{"a":1}`)})
	in, _ := tp.Get(context.Background())
	defer tp.Put(in)
	_ = in.Begin(newExchange("GET", "/"))
	if _, err := in.OnRequestHeaders(true); err != nil {
		t.Fatal(err)
	}
	wantStatuses(t, in, map[uint32]Status{600: StatusOK, 604: StatusOK, 608: StatusBadArgument, 612: StatusOK, 616: StatusNotFound, 620: StatusBadArgument, 624: StatusBadArgument})
	if m := tp.messages(); len(m) != 2 || m[0] != `{"a":1}` || m[1] != `a":1}` {
		t.Fatalf("config seen %q", m)
	}
	_ = in.End()

	// proxy_on_configure returning false fails the plugin
	m, err := Compile(context.Background(), pwtest.Compile(t, module(`
  (func (export "proxy_on_configure") (param $root i32) (param $size i32) (result i32) (i32.const 0))`)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	if _, err := NewPlugin(context.Background(), m, PluginConfig{}); err == nil || !strings.Contains(err.Error(), "proxy_on_configure returned false") {
		t.Fatalf("NewPlugin: %v", err)
	}
}

func TestUnimplementedStubs(t *testing.T) {
	tp := newTestPlugin(t, `(module
  (import "env" "proxy_http_call" (func $http_call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_register_shared_queue" (func $reg_queue (param i32 i32 i32) (result i32)))
  (import "env" "proxy_set_property" (func $set_prop (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_some_future_call" (func $future (param i64 f64) (result i32)))
  (import "env" "proxy_continue_stream" (func $continue (param i32) (result i32)))
  (import "env" "proxy_done" (func $done (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_unstable" "random_get" (func $random_get (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 100) "\6c\00\00\00\0c\00\00\00hello stdout")
  (func (export "proxy_abi_version_0_2_0"))
  (func (export "malloc") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (i32.store (i32.const 600) (call $http_call (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 700)))
    (i32.store (i32.const 604) (call $reg_queue (i32.const 0) (i32.const 0) (i32.const 700)))
    (i32.store (i32.const 608) (call $set_prop (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
    (i32.store (i32.const 612) (call $future (i64.const 1) (f64.const 2)))
    (i32.store (i32.const 616) (call $continue (i32.const 0)))
    (i32.store (i32.const 620) (call $done))
    (i32.store (i32.const 624) (call $fd_write (i32.const 1) (i32.const 100) (i32.const 1) (i32.const 700)))
    (i32.store (i32.const 628) (call $random_get (i32.const 800) (i32.const 16)))
    (i32.const 0)))`, PluginConfig{})
	in, _ := tp.Get(context.Background())
	defer tp.Put(in)
	_ = in.Begin(newExchange("GET", "/"))
	if _, err := in.OnRequestHeaders(true); err != nil {
		t.Fatal(err)
	}
	wantStatuses(t, in, map[uint32]Status{600: StatusUnimplemented, 604: StatusUnimplemented, 608: StatusUnimplemented, 612: StatusUnimplemented, 616: StatusOK, 620: StatusNotFound, 624: 0, 628: 0})
	if m := tp.messages(); len(m) != 1 || m[0] != "hello stdout" {
		t.Fatalf("stdout logged as %q", m)
	}
	_ = in.End()
}

// faulty traps, loops or exhausts memory depending on a request header;
// other requests pass.
const faulty = pwtest.FaultFn + `
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (call $fault) (i32.const 0))
`

func TestFaultsFailOnlyTheirCall(t *testing.T) {
	tp := newTestPlugin(t, module(faulty), PluginConfig{Name: "faulty"})
	for _, c := range []struct{ fault, want string }{
		{"t", "unreachable"},
		{"l", "did not return within"},
		{"m", ""}, // a trap once memory.grow is refused, or a timeout
	} {
		in, err := tp.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = in.Begin(newExchange("GET", "/", "X-Fault", c.fault))
		start := time.Now()
		_, err = in.OnRequestHeaders(true)
		var ce *CallError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) || ce.Callback != "proxy_on_request_headers" {
			t.Fatalf("fault %s: %v", c.fault, err)
		}
		if c.fault == "l" && (!ce.Timeout || time.Since(start) > 5*time.Second) {
			t.Fatalf("loop: timeout %v after %v", ce.Timeout, time.Since(start))
		}
		if c.fault == "m" {
			if pages := in.mem.Size() / 65536; pages > MaxMemoryPages {
				t.Fatalf("memory grew to %d pages", pages)
			}
		}
		if in.End() == nil || in.Failed() == nil {
			t.Fatal("failed instance still usable")
		}
		created := tp.Created()
		tp.Put(in)
		// the next request gets a fresh instance and passes
		if err := tp.run(t, newExchange("GET", "/")); err != nil {
			t.Fatalf("after fault %s: %v", c.fault, err)
		}
		if tp.Created() != created+1 {
			t.Fatalf("created %d → %d: the failed instance was reused?", created, tp.Created())
		}
	}
}

func TestConcurrentRequests(t *testing.T) {
	// a generous timeout: the race detector on a loaded machine is slow, and
	// this test is about isolation, not time limits
	tp := newTestPlugin(t, module(pwtest.Faults), PluginConfig{CallTimeout: 10 * time.Second})
	var workers errgroup.Group
	for g := 0; g < 16; g++ {
		workers.Go(func() error {
			for i := 0; i < 50; i++ {
				hdr := []string{"X-G", itoa(g)}
				trap := g%4 == 0 && i%10 == 0
				if trap {
					hdr = append(hdr, "X-Fault", "t")
				}
				ex := newExchange("GET", "/", hdr...)
				err := tp.run(t, ex)
				switch {
				case trap && err == nil:
					return errors.New("trap not reported")
				case !trap && err != nil:
					return err
				case !trap && (ex.Request.Header.Get("X-Wasm") != "1" || ex.ResponseHeader.Get("X-Wasm") != "1" || ex.Request.Header.Get("X-G") != itoa(g)):
					return errors.New("headers not added")
				}
			}
			return nil
		})
	}
	if err := workers.Wait(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkHeaderFilter: one request through a module adding a request
// and a response header, proven bounded (no watchdog) and, with an unused
// looping function added, run with wazero's watchdog.
func BenchmarkHeaderFilter(b *testing.B) {
	b.Run("bounded", func(b *testing.B) { benchmarkHeaderFilter(b, module(headerAdder), true) })
	b.Run("watchdog", func(b *testing.B) { benchmarkHeaderFilter(b, module(headerAdder+unusedLoop), false) })
}

func benchmarkHeaderFilter(b *testing.B, wat string, bounded bool) {
	// the benchmark measures speed: a loaded machine must not trip the limit
	tp := newTestPlugin(b, wat, PluginConfig{CallTimeout: time.Minute})
	if tp.module.Bounded != bounded {
		b.Fatalf("bounded: %v (%s)", tp.module.Bounded, tp.module.Unbounded)
	}
	ex := newExchange("GET", "/bench", "Accept", "*/*")
	hdr := map[string][]string{"Content-Type": {"text/plain"}}
	ctx := context.Background()
	// warm the pool
	in, _ := tp.Get(ctx)
	tp.Put(in)
	before := tp.Created()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in, err := tp.Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		ex.Request.Header.Del("X-Wasm")
		ex.ResponseHeader = hdr
		delete(hdr, "X-Wasm")
		ex.ResponseStatus = 200
		if err := in.Begin(ex); err != nil {
			b.Fatal(err)
		}
		if _, err := in.OnRequestHeaders(true); err != nil {
			b.Fatal(err)
		}
		if _, err := in.OnResponseHeaders(false); err != nil {
			b.Fatal(err)
		}
		if err := in.End(); err != nil {
			b.Fatal(err)
		}
		tp.Put(in)
	}
	b.ReportMetric(float64(tp.Created()-before)/float64(b.N), "instances/op")
}

func TestPoolBound(t *testing.T) {
	tp := newTestPlugin(t, module(pwtest.Faults), PluginConfig{MaxInstances: 2, MaxWait: 20 * time.Millisecond})
	a, err := tp.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := tp.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Get(context.Background()); !errors.Is(err, ErrBusy) {
		t.Fatalf("third Get: %v", err)
	}
	tp.Put(a)
	c, err := tp.Get(context.Background())
	if err != nil || c != a {
		t.Fatalf("Get after Put: %v (same instance: %v)", err, c == a)
	}
	tp.Put(b)
	tp.Put(c)
	if tp.Created() != 2 {
		t.Fatalf("created %d instances", tp.Created())
	}
}

func TestSharedDataBounds(t *testing.T) {
	s := newSharedStore()
	tp := newTestPlugin(t, module(`
  (data (i32.const 1024) "k")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    ;; a value over 1 MiB is refused
    (drop (memory.grow (i32.const 20)))
    (i32.store (i32.const 600) (call $set_shared (i32.const 1024) (i32.const 1) (i32.const 65536) (i32.const 1048577) (i32.const 0)))
    (i32.store (i32.const 604) (call $set_shared (i32.const 1024) (i32.const 1) (i32.const 65536) (i32.const 1048576) (i32.const 0)))
    (i32.const 0))
`), PluginConfig{CallTimeout: time.Minute}) // copying megabytes is slow under the race detector
	tp.shared = s
	in, _ := tp.Get(context.Background())
	defer tp.Put(in)
	_ = in.Begin(newExchange("GET", "/"))
	if _, err := in.OnRequestHeaders(true); err != nil {
		t.Fatal(err)
	}
	st := func(a uint32) Status { v, _ := in.mem.ReadUint32Le(a); return Status(v) }
	if st(600) != StatusBadArgument || st(604) != StatusOK || s.bytes != 1048577 {
		t.Fatalf("statuses %d %d, bytes %d", st(600), st(604), s.bytes)
	}
	_ = in.End()
}

func TestStreamLifecycle(t *testing.T) {
	tp := newTestPlugin(t, module(`
  (data (i32.const 1024) "created")
  (data (i32.const 1040) "done")
  (data (i32.const 1056) "log")
  (data (i32.const 1072) "delete")
  (data (i32.const 1088) "content-type")
  (data (i32.const 1104) "x")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (drop (call $log (i32.const 2) (i32.const 1024) (i32.const 7))) (i32.const 0))
  (func (export "proxy_on_done") (param $ctx i32) (result i32)
    (drop (call $log (i32.const 2) (i32.const 1040) (i32.const 4))) (i32.const 1))
  (func (export "proxy_on_log") (param $ctx i32)
    (drop (call $log (i32.const 2) (i32.const 1056) (i32.const 3)))
    ;; response headers are readable, not writable
    (if (i32.eqz (call $get_map_value (i32.const 2) (i32.const 1088) (i32.const 12) (i32.const 512) (i32.const 516)))
      (then (call $log_ret (i32.const 2))))
    (i32.store (i32.const 600) (call $add_map_value (i32.const 2) (i32.const 1104) (i32.const 1) (i32.const 1104) (i32.const 1))))
  (func (export "proxy_on_delete") (param $ctx i32)
    (drop (call $log (i32.const 2) (i32.const 1072) (i32.const 6))))
`), PluginConfig{})
	in, _ := tp.Get(context.Background())
	defer tp.Put(in)
	ex := newExchange("GET", "/")
	if err := exchange(in, ex); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tp.messages(), ","); got != "created,done,log,text/plain,delete" {
		t.Fatalf("callbacks: %s", got)
	}
	if v, _ := in.mem.ReadUint32Le(600); Status(v) != StatusBadArgument || ex.ResponseHeader.Get("X") != "" {
		t.Fatalf("response header written in proxy_on_log: status %d", v)
	}
}
