package tests

import (
	"encoding/base64"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/app/wasmapi"
	wasmhostile "github.com/caddy-gateway/gateway/internal/wasm/wasmlimits/hostile"
)

// gatewayBinary builds cmd/caddy from this tree into the test's temporary
// folder (the tests that must run the gateway as a child process).
func gatewayBinary(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "caddy")
	build := exec.Command("go", "build", "-o", path, "./cmd/caddy")
	build.Dir = testgw.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the gateway: %v\n%s", err, out)
	}
	return path
}

// TestHostileModulesCannotKillTheGateway runs the gateway as a child
// process limited to 2 GiB of address space and sends every module of the
// hostile corpus (counts at their type's maximum in every section, the
// 2^32-1-locals and 2^32-1-names modules, truncated and overlapping
// sections, deep nesting) through an upload and an import: each is a 400
// naming the field, within the admin client's timeout, and the process
// lives and still takes a valid module. Without the declared-count check
// the first module makes the runtime's decoder allocate 4 GiB: the process
// dies.
func TestHostileModulesCannotKillTheGateway(t *testing.T) {
	p := testgw.NewProcess(t, "gateway", gatewayBinary(t),
		"GATEWAY_HTTP_LISTEN="+testgw.FreeAddr(t), "GATEWAY_HTTPS_LISTEN="+testgw.FreeAddr(t))
	p.AddressSpace = 2 << 30
	p.Start()
	p.WaitLoaded(60 * time.Second)
	// alive fails the test when the process has died; an answer of
	// status 0 (no answer) gives it the time to be seen dying.
	alive := func(what string, status int) {
		t.Helper()
		grace := time.Duration(0)
		if status == 0 {
			grace = 10 * time.Second
		}
		select {
		case <-p.Done():
			t.Fatalf("the gateway died after %s: %v\n%s", what, p.Err(), tail(p.Logs.String(), 3000))
		case <-time.After(grace):
		}
	}
	for _, m := range wasmhostile.Corpus() {
		b64 := base64.StdEncoding.EncodeToString(m.Wasm)
		st, body := p.Do("POST", "/api/v1/wasm-modules", map[string]any{"name": "hostile", "wasm_base64": b64})
		alive("uploading "+m.Name, st)
		if st != 400 || !strings.Contains(string(body), `"wasm_base64: `) {
			t.Errorf("upload %s: %d %s", m.Name, st, body)
		}
		st, body = p.Do("POST", "/api/v1/import", map[string]any{"format": "gateway-export", "version": 1,
			"wasm_modules": []any{map[string]any{"name": "hostile", "wasm_base64": b64}}})
		alive("importing "+m.Name, st)
		if st != 400 || !strings.Contains(string(body), `"wasm_modules[0].wasm_base64: `) {
			t.Errorf("import %s: %d %s", m.Name, st, body)
		}
	}
	p.Must("POST", "/api/v1/wasm-modules", map[string]any{"name": "minimal", "wat": testgw.MinimalWAT})
	if st, body := p.Do("GET", "/api/v1/wasm-modules", nil); st != 200 || strings.Count(string(body), `"name"`) != 1 {
		t.Fatalf("stored modules: %d %s", st, body)
	}
	alive("the corpus", 1)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// nestedLoopsWAT is the minimal module with a function of n nested loops:
// within the compile limits, and seconds of the compiler (different n are
// different modules, which the runtime's cache does not share).
func nestedLoopsWAT(n int) string {
	body := strings.Repeat("loop\n", n) + strings.Repeat("end\n", n)
	return strings.Replace(testgw.MinimalWAT, `(func (export "proxy_on_vm_start")`,
		"(func\n"+body+`)`+`(func (export "proxy_on_vm_start")`, 1)
}

// TestSlowModuleCheckDoesNotHoldUpChanges: while a WAT module that takes
// the compiler seconds is being checked, an unrelated POST
// /api/v1/services on a gateway whose routes run a wasm plugin (so every
// change loads a configuration with a compiled module) answers before the
// check has ended. It used to wait for it: the compiled-module cache was
// locked while a module compiled.
func TestSlowModuleCheckDoesNotHoldUpChanges(t *testing.T) {
	g := testgw.Start(t, nil)
	svc := g.Service("s")
	uploadModule(t, g, map[string]any{"name": "minimal", "wat": testgw.MinimalWAT})
	wasmRoute(t, g, svc, "/w", "minimal", nil)

	started := make(chan struct{})
	var ended atomic.Bool
	hook := func(name string) func() {
		if name != "slow" {
			return func() {}
		}
		close(started)
		return func() { ended.Store(true) }
	}
	wasmapi.CheckHook.Store(&hook)
	defer wasmapi.CheckHook.Store(nil)

	type answer struct {
		status int
		body   []byte
	}
	upload := make(chan answer, 1)
	go func() {
		st, b := g.DoFor(t, "POST", "/api/v1/wasm-modules", map[string]any{"name": "slow", "wat": nestedLoopsWAT(12_000)})
		upload <- answer{st, b}
	}()
	<-started
	g.Must("POST", "/api/v1/services", map[string]any{"name": "unrelated"})
	if ended.Load() {
		t.Fatal("POST /api/v1/services answered only after the slow module's check had ended")
	}
	a := <-upload
	if a.status != 200 && !(a.status == 400 && strings.Contains(string(a.body), "took longer than the limit")) {
		t.Fatalf("slow upload: %d %s", a.status, a.body)
	}
}

// TestModuleCheckTimeLimit: a module whose check takes longer than the
// limit is 400 naming the limit and the field, through an upload and an
// import (the limit shortened here: the default is 30 s), and nothing is
// stored.
func TestModuleCheckTimeLimit(t *testing.T) {
	g := testgw.Start(t, nil)
	defer wasmapi.SetCheckTime(200 * time.Millisecond)()
	g.WantError(400, "POST", "/api/v1/wasm-modules", map[string]any{"name": "slow", "wat": nestedLoopsWAT(12_001)},
		"wat: ", "took longer than the limit of 200ms")
	// the slot is held until the compiler has stopped: give it the time
	restore := wasmapi.SetCheckTime(time.Minute)
	g.WantError(400, "POST", "/api/v1/import", map[string]any{"format": "gateway-export", "version": 1,
		"wasm_modules": []any{map[string]any{"name": "bad", "wat": "(module"}}}, "wasm_modules[0].wat: ")
	restore()
	g.WantError(400, "POST", "/api/v1/import", map[string]any{"format": "gateway-export", "version": 1,
		"wasm_modules": []any{map[string]any{"name": "slow", "wat": nestedLoopsWAT(12_002)}}},
		"wasm_modules[0].wat: ", "took longer than the limit of 200ms")
	if mods := g.List("/api/v1/wasm-modules"); len(mods) != 0 {
		t.Fatalf("stored: %v", mods)
	}
}

// TestModuleChecksOneAtATime: two slow uploads sent together are checked
// one after the other (the second check starts when the first has
// ended), and both are answered.
func TestModuleChecksOneAtATime(t *testing.T) {
	g := testgw.Start(t, nil)
	var running, overlapped atomic.Int32
	hook := func(string) func() {
		if running.Add(1) > 1 {
			overlapped.Add(1)
		}
		return func() { running.Add(-1) }
	}
	wasmapi.CheckHook.Store(&hook)
	defer wasmapi.CheckHook.Store(nil)
	done := make(chan int, 2)
	for i, n := range []int{6_000, 6_001} {
		go func() {
			st, _ := g.DoFor(t, "POST", "/api/v1/wasm-modules", map[string]any{"name": fmt.Sprintf("slow%d", i), "wat": nestedLoopsWAT(n)})
			done <- st
		}()
	}
	for range 2 {
		if st := <-done; st != 200 {
			t.Errorf("upload: %d", st)
		}
	}
	if overlapped.Load() != 0 {
		t.Fatal("two module checks ran at once")
	}
}
