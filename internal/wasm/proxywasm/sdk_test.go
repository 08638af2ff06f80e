package proxywasm

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestAssemblyScriptFixture runs the module built with a real SDK
// (AssemblyScript, @solo-io/proxy-runtime, ABI 0.2.0).
func TestAssemblyScriptFixture(t *testing.T) {
	wasm, err := os.ReadFile("../../../app/tests/testdata/wasm/as-filter/as-filter.wasm")
	if err != nil {
		t.Skipf("fixture: %v", err)
	}
	if err := CheckModule(context.Background(), wasm); err != nil {
		t.Fatalf("CheckModule: %v", err)
	}
	m, err := Compile(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	if m.ABI != "0.2.0" {
		t.Errorf("ABI %s", m.ABI)
	}
	// AssemblyScript's runtime (allocator, strings) loops: it keeps the
	// watchdog
	if m.Bounded || !strings.Contains(m.Unbounded, "loop") {
		t.Errorf("bounded %v (%s)", m.Bounded, m.Unbounded)
	}
	p, err := NewPlugin(context.Background(), m, PluginConfig{Name: "as", Configuration: []byte("configured")})
	if err != nil {
		t.Fatalf("NewPlugin: %v", err)
	}
	defer p.Close()
	tp := &testPlugin{Plugin: p}
	ex := newExchange("GET", "/")
	if err := tp.run(t, ex); err != nil {
		t.Fatal(err)
	}
	// The filter reads its configuration itself (the onConfigure of
	// @solo-io/proxy-runtime 0.1.8 passes the configuration size where
	// proxy_get_buffer_bytes takes the address of the returned size).
	if ex.Local != nil || ex.ResponseHeader.Get("X-As-Filter") != "configured" {
		t.Fatalf("local %+v, response header %v", ex.Local, ex.ResponseHeader)
	}
	ex = newExchange("GET", "/", "X-Deny", "1")
	if err := tp.run(t, ex); err != nil {
		t.Fatal(err)
	}
	if ex.Local == nil || ex.Local.Status != 403 || string(ex.Local.Body) != "denied by as-filter" {
		t.Fatalf("local %+v", ex.Local)
	}
}

// BenchmarkAssemblyScriptFilter: one request through the SDK-built filter
// (it loops, so it runs with the watchdog: a goroutine per callback).
func BenchmarkAssemblyScriptFilter(b *testing.B) {
	wasm, err := os.ReadFile("../../../app/tests/testdata/wasm/as-filter/as-filter.wasm")
	if err != nil {
		b.Skipf("fixture: %v", err)
	}
	b.Run("guarded", func(b *testing.B) { benchmarkAS(b, wasm) })
	// what the guard's checkpoints cost (the module then cannot be
	// stopped in its recursions)
	b.Run("unguarded", func(b *testing.B) {
		guardUnbounded = false
		defer func() { guardUnbounded = true }()
		benchmarkAS(b, wasm)
	})
}

func benchmarkAS(b *testing.B, wasm []byte) {
	// compiled apart from the cache: the two variants share the bytes
	m, err := compile(context.Background(), SHA256(wasm), wasm)
	if err != nil {
		b.Fatal(err)
	}
	m.refs = 1
	defer func() { _ = m.rt.Close(context.Background()) }()
	p, err := NewPlugin(context.Background(), m, PluginConfig{Name: "as", Configuration: []byte("configured"), CallTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	tp := &testPlugin{Plugin: p}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := tp.run(b, newExchange("GET", "/")); err != nil {
			b.Fatal(err)
		}
	}
}
