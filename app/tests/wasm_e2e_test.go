package tests

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/wasm/membudget"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm"
)

// End-to-end tests of wasm plugins: modules uploaded through the admin API
// (WAT text and binaries, one built with the AssemblyScript SDK), plugins
// scoped to routes, real requests through the gateway's proxy listener to
// a real upstream on 127.0.0.1.

// watFile reads a WAT module of testdata/wasm.
func watFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/wasm/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// countingEcho is echo that counts the requests it answered.
func countingEcho(t testing.TB, name string) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	inner := testgw.Echo(t, name)
	s := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		resp, err := http.DefaultTransport.RoundTrip(func() *http.Request {
			out := r.Clone(r.Context())
			out.URL.Scheme, out.URL.Host, out.RequestURI = "http", testgw.Addr(inner), ""
			return out
		}())
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(readAll(resp))
	})
	return s, &n
}

func readAll(resp *http.Response) []byte {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String())
		}
	}
}

// wasmRoute creates a route for prefix with a route-scoped wasm plugin of
// module (nil config: none); it returns the route and plugin ids.
func wasmRoute(t testing.TB, g *testgw.Gateway, svc int64, prefix, module string, config any) (int64, int64) {
	t.Helper()
	r := g.Route(strings.Trim(prefix, "/"), svc, map[string]any{"paths": []string{prefix}})
	cfg := map[string]any{"module": module}
	if config != nil {
		cfg["config"] = config
	}
	return r, addPlugin(t, g, "wasm", "route", r, cfg)
}

// TestWasmFilterThroughGateway: a WAT filter rewrites request headers
// (seen by the upstream), reads properties, shares data between requests,
// adds a response header carrying its plugin configuration (a config change
// reaches it), and serves 16 concurrent clients, each request seeing its
// own headers. Routes without the plugin are untouched.
func TestWasmFilterThroughGateway(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Echo(t, "up")
	svc := g.Service("s", testgw.Addr(up))
	uploadModule(t, g, map[string]any{"name": "e2e-filter", "wat": watFile(t, "filter.wat")})
	_, pid := wasmRoute(t, g, svc, "/f", "e2e-filter", "v1")
	plain := g.Route("plain", svc, testgw.Paths("/plain"))
	_ = plain

	r := send(t, g, "GET", "/f/a?q=1", nil, "X-In", "hello", "X-Remove-Me", "secret", "User-Agent", "test-agent")
	if r.Status != 200 || r.Header.Get("X-Wasm") != "v1" {
		t.Fatalf("/f: %d x-wasm %q: %s", r.Status, r.Header.Get("X-Wasm"), r.Body)
	}
	e := testgw.DecodeEcho(t, r.Body)
	h := http.Header(e.Headers)
	if h.Get("X-From-Wasm") != "hello" || h.Get("X-Remove-Me") != "" || h.Get("User-Agent") != "wasm-agent" {
		t.Fatalf("request headers at the upstream: %v", e.Headers)
	}
	if h.Get("X-Path") != "/f/a?q=1" || h.Get("X-Method") != "GET" {
		t.Fatalf("properties: x-path %q x-method %q", h.Get("X-Path"), h.Get("X-Method"))
	}
	if r := send(t, g, "GET", "/plain", nil, "X-In", "hello"); r.Status != 200 || r.Header.Get("X-Wasm") != "" ||
		http.Header(testgw.DecodeEcho(t, r.Body).Headers).Get("X-From-Wasm") != "" {
		t.Fatalf("a route without the plugin: %d %v", r.Status, r.Header)
	}

	// Shared data: one request stores, later ones read.
	if r := send(t, g, "GET", "/f/1", nil); r.Header.Get("X-Shared") != "none" {
		t.Fatalf("x-shared before any x-set: %q", r.Header.Get("X-Shared"))
	}
	send(t, g, "GET", "/f/2", nil, "X-Set", "remembered")
	if r := send(t, g, "GET", "/f/3", nil); r.Header.Get("X-Shared") != "remembered" {
		t.Fatalf("x-shared after x-set: %q", r.Header.Get("X-Shared"))
	}

	// A new plugin configuration reaches the module.
	g.Must("PUT", "/api/v1/plugins/"+itoa(pid), map[string]any{"type": "wasm", "scope": "route", "route_id": routeOf(t, g, pid),
		"config": map[string]any{"module": "e2e-filter", "config": map[string]any{"v": 2}}})
	if r := send(t, g, "GET", "/f/4", nil); r.Header.Get("X-Wasm") != `{"v":2}` || r.Header.Get("X-Shared") != "remembered" {
		t.Fatalf("after the config change: x-wasm %q x-shared %q", r.Header.Get("X-Wasm"), r.Header.Get("X-Shared"))
	}

	// 16 concurrent clients, each request with its own x-in.
	var wg sync.WaitGroup
	errs := make(chan string, 16*20)
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			client := &http.Client{}
			for i := 0; i < 20; i++ {
				want := fmt.Sprintf("client-%d-req-%d", c, i)
				req, _ := http.NewRequest("GET", g.ProxyURL+"/f/c", nil)
				req.Header.Set("X-In", want)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				body := readAll(resp)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Header.Get("X-Wasm") != `{"v":2}` {
					errs <- fmt.Sprintf("%s: %d %q %s", want, resp.StatusCode, resp.Header.Get("X-Wasm"), body)
					continue
				}
				if got := http.Header(testgw.DecodeEcho(t, string(body)).Headers).Get("X-From-Wasm"); got != want {
					errs <- fmt.Sprintf("%s: the upstream saw x-from-wasm %q", want, got)
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// routeOf is the route_id of a route-scoped plugin.
func routeOf(t testing.TB, g *testgw.Gateway, pid int64) int64 {
	t.Helper()
	n, _ := g.Must("GET", "/api/v1/plugins/"+itoa(pid), nil)["route_id"].(float64)
	return int64(n)
}

// TestWasmLocalResponses: a module's local response answers the client
// without calling the upstream (a WAT module and the AssemblyScript SDK
// module); the AssemblyScript module's response header carries its plugin
// configuration.
func TestWasmLocalResponses(t *testing.T) {
	g := testgw.Start(t, nil)
	up, hits := countingEcho(t, "up")
	svc := g.Service("s", testgw.Addr(up))
	uploadModule(t, g, map[string]any{"name": "e2e-deny", "wat": watFile(t, "deny.wat")})
	uploadModule(t, g, map[string]any{"name": "e2e-as", "wasm_base64": base64.StdEncoding.EncodeToString(asFilter(t))})
	wasmRoute(t, g, svc, "/deny", "e2e-deny", nil)
	wasmRoute(t, g, svc, "/as", "e2e-as", "from-the-plugin-config")

	r := send(t, g, "GET", "/deny/x", nil)
	if r.Status != 418 || r.Body != "denied by wat" || r.Header.Get("X-Denied") != "yes" {
		t.Fatalf("/deny: %d %v %q", r.Status, r.Header, r.Body)
	}
	if hits.Load() != 0 {
		t.Fatalf("the upstream was called %d times for local responses", hits.Load())
	}

	r = send(t, g, "GET", "/as/x", nil, "X-In", "1")
	if r.Status != 200 || r.Header.Get("X-As-Filter") != "from-the-plugin-config" || testgw.DecodeEcho(t, r.Body).Path != "/as/x" {
		t.Fatalf("/as: %d x-as-filter %q: %s", r.Status, r.Header.Get("X-As-Filter"), r.Body)
	}
	if hits.Load() != 1 {
		t.Fatalf("upstream hits %d, want 1", hits.Load())
	}
	r = send(t, g, "GET", "/as/x", nil, "X-Deny", "1")
	if r.Status != 403 || r.Body != "denied by as-filter" {
		t.Fatalf("/as with x-deny: %d %q", r.Status, r.Body)
	}
	if hits.Load() != 1 {
		t.Fatalf("the AssemblyScript module's local response called the upstream")
	}
}

// TestWasmFailuresAreIsolated: a module that traps, one that loops and one
// that exhausts its memory each fail only their own requests (500 with a
// JSON error), repeatedly, while another route's wasm plugin keeps serving,
// also concurrently.
func TestWasmFailuresAreIsolated(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Echo(t, "up")
	svc := g.Service("s", testgw.Addr(up))
	uploadModule(t, g, map[string]any{"name": "iso-filter", "wat": watFile(t, "filter.wat")})
	wasmRoute(t, g, svc, "/ok", "iso-filter", "fine")
	for _, name := range []string{"trap", "loop", "hungry"} {
		uploadModule(t, g, map[string]any{"name": "iso-" + name, "wat": watFile(t, name+".wat")})
		wasmRoute(t, g, svc, "/"+name, "iso-"+name, nil)
	}
	okRoute := func() {
		t.Helper()
		if r := send(t, g, "GET", "/ok", nil, "X-In", "still"); r.Status != 200 || r.Header.Get("X-Wasm") != "fine" ||
			http.Header(testgw.DecodeEcho(t, r.Body).Headers).Get("X-From-Wasm") != "still" {
			t.Fatalf("the healthy route: %d %v %s", r.Status, r.Header, r.Body)
		}
	}
	okRoute()
	for round := 0; round < 2; round++ {
		for _, name := range []string{"trap", "loop", "hungry"} {
			var wg sync.WaitGroup
			var bad proxied
			wg.Add(1)
			go func() { defer wg.Done(); bad = send(t, g, "GET", "/"+name, nil) }()
			okRoute()
			wg.Wait()
			wantGatewayError(t, bad, 500, "")
			okRoute()
		}
	}
}

// TestWasmRejectedConfiguration: a module whose proxy_on_configure returns
// false makes the plugin's creation a 400 naming the module; nothing is
// stored and traffic is unchanged.
func TestWasmRejectedConfiguration(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Echo(t, "up")
	svc := g.Service("s", testgw.Addr(up))
	route := g.Route("r", svc, testgw.Paths("/r"))
	uploadModule(t, g, map[string]any{"name": "picky", "wat": watFile(t, "reject-config.wat")})
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "wasm", "scope": "route", "route_id": route,
		"config": map[string]any{"module": "picky", "config": "anything"}}, "picky")
	var ps []any
	g.JSON("GET", "/api/v1/plugins", nil, &ps)
	if len(ps) != 0 {
		t.Fatalf("a rejected plugin was stored: %v", ps)
	}
	if r := send(t, g, "GET", "/r", nil); r.Status != 200 {
		t.Fatalf("traffic after the rejected change: %d", r.Status)
	}
}

// TestWasmModuleBytesByReference: the runtime's source registry holds the
// bytes of the modules enabled wasm plugins use, loaded from the store on
// compile: a module no plugin uses any more is dropped, one needed again is
// read again, and a restarted gateway (a fresh registry) loads what its
// stored plugins use.
func TestWasmModuleBytesByReference(t *testing.T) {
	dsn := t.TempDir() + "/gateway.db"
	g := testgw.Start(t, &testgw.Options{DSN: dsn})
	up := testgw.Echo(t, "up")
	svc := g.Service("s", testgw.Addr(up))
	m := uploadModule(t, g, map[string]any{"name": "by-ref", "wat": watFile(t, "filter.wat")})
	if _, ok := proxywasm.Source(m.SHA256); ok {
		t.Fatal("an unused module's bytes are in the registry")
	}
	route, pid := wasmRoute(t, g, svc, "/ref", "by-ref", "ref")
	if _, ok := proxywasm.Source(m.SHA256); !ok {
		t.Fatal("a used module's bytes are not in the registry")
	}
	put := func(enabled bool) {
		t.Helper()
		g.Must("PUT", "/api/v1/plugins/"+itoa(pid), map[string]any{"type": "wasm", "scope": "route", "route_id": route, "enabled": enabled,
			"config": map[string]any{"module": "by-ref", "config": "ref"}})
	}
	put(false)
	if _, ok := proxywasm.Source(m.SHA256); ok {
		t.Fatal("the bytes of a module no enabled plugin uses stay in the registry")
	}
	put(true)
	if r := send(t, g, "GET", "/ref", nil); r.Status != 200 || r.Header.Get("X-Wasm") != "ref" {
		t.Fatalf("after re-enabling: %d %v", r.Status, r.Header)
	}

	if err := stopGateway(); err != nil {
		t.Fatal(err)
	}
	proxywasm.DropSource(m.SHA256) // as in a new process
	g = testgw.Start(t, &testgw.Options{DSN: dsn})
	if r := send(t, g, "GET", "/ref", nil); r.Status != 200 || r.Header.Get("X-Wasm") != "ref" {
		t.Fatalf("after a restart: %d %v %s", r.Status, r.Header, r.Body)
	}
}

// TestWasmMemoryLimit: the gateway app's wasm_memory_limit bounds the
// linear memory of all wasm instances together. A request that needs a new
// instance while the budget has no room for one is answered 503, the
// others are served, and the instance started at load is kept.
func TestWasmMemoryLimit(t *testing.T) {
	const limit = 200 << 10 // room for one instance of two 64 KiB pages
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"wasm_memory_limit": limit}})
	if got := membudget.Default.Limit(); got != limit {
		t.Fatalf("process wasm memory limit %d, want %d", got, limit)
	}
	// the first request waits at the upstream until released; any other
	// is answered at once
	arrived, release := make(chan struct{}), make(chan struct{})
	var n atomic.Int64
	slow := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			close(arrived)
			<-release
		}
		_, _ = w.Write([]byte("slow"))
	})
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock() // before Close, which waits for the request
	svc := g.Service("s", testgw.Addr(slow))
	uploadModule(t, g, map[string]any{"name": "mem-min", "wat": testgw.MinimalWAT})
	wasmRoute(t, g, svc, "/slow", "mem-min", nil)

	first := make(chan proxied, 1)
	go func() { first <- send(t, g, "GET", "/slow", nil) }()
	<-arrived // the plugin's one instance serves it until the upstream answers
	wantGatewayError(t, send(t, g, "GET", "/slow", nil), http.StatusServiceUnavailable, "wasm memory limit reached")
	unblock()
	if r := <-first; r.Status != 200 || string(r.Body) != "slow" {
		t.Fatalf("the request holding the instance: %d %s", r.Status, r.Body)
	}
	if r := send(t, g, "GET", "/slow", nil); r.Status != 200 {
		t.Fatalf("after the instance came back: %d %s", r.Status, r.Body)
	}
	if used := membudget.Default.Used(); used != 128<<10 {
		t.Fatalf("%d bytes of wasm memory in use, want one instance's 131072", used)
	}
}
