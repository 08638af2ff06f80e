package proxywasm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm/pwtest"
)

// imports every test module may use
const imports = `
  (import "env" "proxy_log" (func $log (param i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value" (func $get_map_value (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_map_value (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_replace_header_map_value" (func $replace_map_value (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_remove_header_map_value" (func $remove_map_value (param i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_pairs" (func $get_map_pairs (param i32 i32 i32) (result i32)))
  (import "env" "proxy_set_header_map_pairs" (func $set_map_pairs (param i32 i32 i32) (result i32)))
  (import "env" "proxy_get_buffer_bytes" (func $get_buffer (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_send_local_response" (func $send_local (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_property" (func $get_property (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_shared_data" (func $get_shared (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_shared_data" (func $set_shared (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_tick_period_milliseconds" (func $set_tick (param i32) (result i32)))
  (import "env" "proxy_set_effective_context" (func $set_effective (param i32) (result i32)))
  (import "env" "proxy_get_log_level" (func $get_log_level (param i32) (result i32)))
  (import "env" "proxy_get_current_time_nanoseconds" (func $now (param i32) (result i32)))
`

// module builds a test module: imports, pwtest.Prelude, the log_ret
// helper, then body.
func module(body string) string {
	return "(module\n" + imports + pwtest.Prelude + logRet + body + "\n)"
}

// logRet logs the value last returned at 512/516.
const logRet = `
  (func $log_ret (param $lvl i32)
    (drop (call $log (local.get $lvl) (i32.load (i32.const 512)) (i32.load (i32.const 516)))))
`

// wantStatuses checks the statuses a test module stored in its memory
// (address → status).
func wantStatuses(t *testing.T, in *Instance, want map[uint32]Status) {
	t.Helper()
	for a, w := range want {
		if v, _ := in.mem.ReadUint32Le(a); Status(v) != w {
			t.Errorf("status at %d = %d, want %d", a, v, w)
		}
	}
}

// wdata renders bytes as a WAT string literal.
func wdata(b []byte) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range b {
		fmt.Fprintf(&sb, "\\%02x", c)
	}
	sb.WriteByte('"')
	return sb.String()
}

type testPlugin struct {
	*Plugin
	logs *observer.ObservedLogs
}

func newTestPlugin(t testing.TB, wat string, cfg PluginConfig) *testPlugin {
	t.Helper()
	wasm := pwtest.Compile(t, wat)
	m, err := Compile(context.Background(), wasm)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	defer m.Release()
	core, logs := observer.New(zapcore.DebugLevel)
	cfg.Logger = zap.New(core)
	p, err := NewPlugin(context.Background(), m, cfg)
	if err != nil {
		t.Fatalf("NewPlugin: %v", err)
	}
	t.Cleanup(p.Close)
	return &testPlugin{Plugin: p, logs: logs}
}

func (tp *testPlugin) messages() []string {
	var out []string
	for _, e := range tp.logs.All() {
		out = append(out, e.Message)
	}
	return out
}

func newExchange(method, target string, hdr ...string) *Exchange {
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return &Exchange{Request: r}
}

// run takes an instance and runs exchange on it; it returns the instance's
// error, if any.
func (tp *testPlugin) run(t testing.TB, ex *Exchange) error {
	t.Helper()
	in, err := tp.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Put(in)
	return exchange(in, ex)
}

// exchange runs an exchange's request phase on in and, unless a local
// response was sent, a 200 text/plain response phase, then ends the stream.
func exchange(in *Instance, ex *Exchange) error {
	if err := in.Begin(ex); err != nil {
		return err
	}
	if _, err := in.OnRequestHeaders(true); err != nil {
		return err
	}
	if ex.Local == nil {
		ex.ResponseStatus = http.StatusOK
		ex.ResponseHeader = http.Header{"Content-Type": {"text/plain"}}
		if _, err := in.OnResponseHeaders(false); err != nil {
			return err
		}
	}
	return in.End()
}
