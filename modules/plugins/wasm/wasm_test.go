package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/sync/errgroup"

	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm/pwtest"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestMain(m *testing.M) { plugintest.Main(m) }

// filter is a test module: ABI boilerplate, then body. Scratch at 512
// (returned pointer) and 516 (returned size), data from 1024, heap from
// 65536 (reset per request).
func filter(body string) string {
	return `(module
  (import "env" "proxy_log" (func $log (param i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value" (func $get_map_value (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add_map_value (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_replace_header_map_value" (func $replace_hdr (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_buffer_bytes" (func $get_buffer (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_buffer_bytes" (func $set_buffer (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_send_local_response" (func $send_local (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_property" (func $get_property (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_shared_data" (func $get_shared (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_shared_data" (func $set_shared (param i32 i32 i32 i32 i32) (result i32)))
` + pwtest.Prelude + `  ;; add_ret adds the value last returned at 512/516 as header (map, name, len)
  (func $add_ret (param $map i32) (param $name i32) (param $len i32)
    (drop (call $add_map_value (local.get $map) (local.get $name) (local.get $len) (i32.load (i32.const 512)) (i32.load (i32.const 516)))))
` + body + "\n)"
}

// start loads a route [gateway_wasm with the module, reverse_proxy].
func start(t *testing.T, wat string, extra map[string]any, opts ...plugintest.Option) *plugintest.Gateway {
	t.Helper()
	sha := proxywasm.PutSource(pwtest.Compile(t, wat))
	h := map[string]any{"handler": "gateway_wasm", "module": "test-filter", "module_sha256": sha}
	for k, v := range extra {
		h[k] = v
	}
	return plugintest.Start(t, []any{h}, opts...)
}

func TestHeadersConfigAndRewrite(t *testing.T) {
	wat := filter(`
  (data (i32.const 1024) "x-in")
  (data (i32.const 1040) "x-seen")
  (data (i32.const 1056) "x-config")
  (data (i32.const 1072) ":path")
  (data (i32.const 1088) "/rewritten")
  (data (i32.const 1104) "x-wasm")
  (data (i32.const 1120) "1")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (if (i32.eqz (call $get_map_value (i32.const 0) (i32.const 1024) (i32.const 4) (i32.const 512) (i32.const 516)))
      (then (call $add_ret (i32.const 0) (i32.const 1040) (i32.const 6))))
    (if (i32.eqz (call $get_buffer (i32.const 7) (i32.const 0) (i32.const 4096) (i32.const 512) (i32.const 516)))
      (then (call $add_ret (i32.const 0) (i32.const 1056) (i32.const 8))))
    (drop (call $replace_hdr (i32.const 0) (i32.const 1072) (i32.const 5) (i32.const 1088) (i32.const 10)))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (drop (call $add_map_value (i32.const 2) (i32.const 1104) (i32.const 6) (i32.const 1120) (i32.const 1)))
    (i32.const 0))
`)
	for _, c := range []struct {
		config any
		want   string
	}{
		{map[string]any{"a": 1, "b": []int{1, 2}}, `{"a":1,"b":[1,2]}`},
		{"plain text", "plain text"},
		{nil, ""},
	} {
		g := start(t, wat, map[string]any{"config": c.config})
		res := g.Get("/orig?q=1", "X-In", "hello")
		plugintest.WantStatus(t, res, 200)
		if res.Header.Get("X-Wasm") != "1" {
			t.Fatalf("response header: %v", res.Header)
		}
		if got := plugintest.UpstreamHeader(t, res, "X-Seen"); got != "hello" {
			t.Fatalf("upstream x-seen %q", got)
		}
		if got := plugintest.UpstreamHeader(t, res, "X-Config"); got != c.want {
			t.Fatalf("config %v: module saw %q, want %q", c.config, got, c.want)
		}
		if res.Echo.Path != "/rewritten" {
			t.Fatalf("upstream path %q", res.Echo.Path)
		}
	}
}

func TestLocalResponse(t *testing.T) {
	// serialized header map {x-denied: yes}
	hdr := "\\01\\00\\00\\00\\08\\00\\00\\00\\03\\00\\00\\00x-denied\\00yes\\00"
	g := start(t, filter(`
  (data (i32.const 1024) "x-deny")
  (data (i32.const 1040) "denied by wasm")
  (data (i32.const 1072) "`+hdr+`")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (if (i32.eqz (call $get_map_value (i32.const 0) (i32.const 1024) (i32.const 6) (i32.const 512) (i32.const 516)))
      (then
        (drop (call $send_local (i32.const 403) (i32.const 0) (i32.const 0) (i32.const 1040) (i32.const 14) (i32.const 1072) (i32.const 33) (i32.const 0)))
        (return (i32.const 1))))
    (i32.const 0))
`), nil)
	res := g.Get("/", "X-Deny", "1")
	plugintest.WantStatus(t, res, 403)
	if res.Body != "denied by wasm" || res.Header.Get("X-Denied") != "yes" || res.Echo != nil {
		t.Fatalf("local response %q %v", res.Body, res.Header)
	}
	if n := len(g.Upstream.Requests()); n != 0 {
		t.Fatalf("upstream called %d times", n)
	}
	plugintest.WantStatus(t, g.Get("/"), 200)
	if n := len(g.Upstream.Requests()); n != 1 {
		t.Fatalf("upstream called %d times", n)
	}
}

func TestProperties(t *testing.T) {
	props := []struct{ path, header string }{
		{"request\x00path", "x-p-path"},
		{"request\x00method", "x-p-method"},
		{"request\x00host", "x-p-host"},
		{"source\x00address", "x-p-source"},
		{"destination\x00address", "x-p-dest"},
		{"plugin_name", "x-p-name"},
		{"plugin_vm_id", "x-p-vm"},
	}
	body := ""
	calls := ""
	for i, p := range props {
		pa, ha := 2048+64*i, 4096+64*i
		body += fmt.Sprintf("  (data (i32.const %d) %q)\n  (data (i32.const %d) %q)\n", pa, strings.ReplaceAll(p.path, "\x00", "\\00"), ha, p.header)
		calls += fmt.Sprintf("    (if (i32.eqz (call $get_property (i32.const %d) (i32.const %d) (i32.const 512) (i32.const 516))) (then (call $add_ret (i32.const 0) (i32.const %d) (i32.const %d))))\n", pa, len(p.path), ha, len(p.header))
	}
	body = strings.ReplaceAll(body, `\\00`, `\00`)
	g := start(t, filter(body+`
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
`+calls+`    (i32.const 0))
`), nil)
	res := g.Do("POST", "/a/b?c=d", strings.NewReader("x"))
	plugintest.WantStatus(t, res, 200)
	h := res.Echo.Header
	addr := strings.TrimPrefix(g.URL, "http://")
	if h.Get("X-P-Path") != "/a/b?c=d" || h.Get("X-P-Method") != "POST" || h.Get("X-P-Host") != addr ||
		!strings.HasPrefix(h.Get("X-P-Source"), "127.0.0.1:") || h.Get("X-P-Dest") != addr ||
		h.Get("X-P-Name") != "test-filter" || h.Get("X-P-Vm") != "test-filter" {
		t.Fatalf("properties seen: %v", h)
	}
}

// sharedRuns names each run's VM: shared data is process-wide per VM id
// and outlives the gateway that wrote it (so a reload keeps it), so a
// second run (-count=2) under the same name would start from the first's.
var sharedRuns atomic.Int64

func TestSharedDataBetweenRequests(t *testing.T) {
	// each request appends "x" to the shared value "count" (with CAS) and
	// sends the new value upstream as x-count, starting from no value
	g := start(t, filter(`
  (data (i32.const 1024) "count")
  (data (i32.const 1040) "x-count")
  (data (i32.const 3000) "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
  (func (export "proxy_on_request_headers") (param $ctx i32) (param $n i32) (param $eos i32) (result i32)
    (local $len i32)
    (i32.store (i32.const 516) (i32.const 0))
    (i32.store (i32.const 520) (i32.const 0))
    (drop (call $get_shared (i32.const 1024) (i32.const 5) (i32.const 512) (i32.const 516) (i32.const 520)))
    (local.set $len (i32.add (i32.load (i32.const 516)) (i32.const 1)))
    (if (i32.ne (call $set_shared (i32.const 1024) (i32.const 5) (i32.const 3000) (local.get $len) (i32.load (i32.const 520))) (i32.const 0))
      (then unreachable))
    (drop (call $add_map_value (i32.const 0) (i32.const 1040) (i32.const 7) (i32.const 3000) (local.get $len)))
    (i32.const 0))
`), map[string]any{"module": fmt.Sprintf("shared-test-%d", sharedRuns.Add(1))})
	for i := 1; i <= 3; i++ {
		res := g.Get("/")
		if got := plugintest.UpstreamHeader(t, res, "X-Count"); got != strings.Repeat("x", i) {
			t.Fatalf("request %d: x-count %q", i, got)
		}
	}
}

func TestFaultsFailOnlyTheirRequests(t *testing.T) {
	g := start(t, filter(pwtest.Faults), nil)
	for _, fault := range []string{"t", "l", "m"} {
		res := g.Get("/", "X-Fault", fault)
		plugintest.WantGatewayError(t, res, 500)
		plugintest.WantErrorBody(t, res, "wasm plugin failed")
		ok := g.Get("/")
		plugintest.WantStatus(t, ok, 200)
		if ok.Header.Get("X-Wasm") != "1" || plugintest.UpstreamHeader(t, ok, "X-Wasm") != "1" {
			t.Fatalf("after fault %s: %v", fault, ok.Header)
		}
	}
}

func TestConcurrentClients(t *testing.T) {
	// a generous callback limit: the race detector on a loaded machine is
	// slow, and this test is about isolation
	g := start(t, filter(pwtest.Faults), map[string]any{"call_timeout_ms": 10000})
	var clients errgroup.Group
	for c := 0; c < 16; c++ {
		clients.Go(func() error {
			for i := 0; i < 20; i++ {
				trap := c%4 == 0 && i%5 == 0
				hdr := []string{"X-Client", fmt.Sprint(c)}
				if trap {
					hdr = append(hdr, "X-Fault", "t")
				}
				req, _ := http.NewRequest("GET", g.URL+"/", nil)
				for j := 0; j < len(hdr); j += 2 {
					req.Header.Set(hdr[j], hdr[j+1])
				}
				resp, err := g.Client.Do(req)
				if err != nil {
					return err
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case trap && resp.StatusCode != 500:
					return fmt.Errorf("trap answered %d", resp.StatusCode)
				case !trap && (resp.StatusCode != 200 || resp.Header.Get("X-Wasm") != "1"):
					return fmt.Errorf("client %d: %d %v %s", c, resp.StatusCode, resp.Header, b)
				case !trap:
					var seen plugintest.Seen
					if json.Unmarshal(b, &seen) != nil || seen.Header.Get("X-Client") != fmt.Sprint(c) || seen.Header.Get("X-Wasm") != "1" {
						return fmt.Errorf("client %d: upstream saw %s", c, b)
					}
				}
			}
			return nil
		})
	}
	if err := clients.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestBodies(t *testing.T) {
	g := start(t, filter(`
  (data (i32.const 1024) "replaced request")
  (data (i32.const 1056) "; appended by wasm")
  (func (export "proxy_on_request_body") (param $ctx i32) (param $size i32) (param $eos i32) (result i32)
    (drop (call $set_buffer (i32.const 0) (i32.const 0) (local.get $size) (i32.const 1024) (i32.const 16)))
    (i32.const 0))
  (func (export "proxy_on_response_body") (param $ctx i32) (param $size i32) (param $eos i32) (result i32)
    (drop (call $set_buffer (i32.const 1) (local.get $size) (i32.const 0) (i32.const 1056) (i32.const 18)))
    (i32.const 0))
`), nil, plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Length", fmt.Sprint(len(b)+4))
		_, _ = w.Write(append([]byte("got "), b...))
	}))
	res := g.Do("POST", "/", strings.NewReader("original body"))
	plugintest.WantStatus(t, res, 200)
	if res.Body != "got replaced request; appended by wasm" {
		t.Fatalf("body %q", res.Body)
	}
	if up := g.Upstream.Last(); up.Body != "replaced request" {
		t.Fatalf("upstream got %q", up.Body)
	}
}

func TestProvisionErrors(t *testing.T) {
	refuse := pwtest.Compile(t, filter(`
  (func (export "proxy_on_configure") (param $root i32) (param $size i32) (result i32) (i32.const 0))`))
	for _, c := range []struct {
		handler map[string]any
		want    string
	}{
		{map[string]any{"module": "refuser", "module_sha256": proxywasm.PutSource(refuse)}, `wasm module "refuser": proxy_on_configure returned false`},
		{map[string]any{"module": "gone", "module_sha256": strings.Repeat("ab", 32)}, `wasm module "gone": its bytes`},
		{map[string]any{"module": "none"}, `wasm module "none" is not available`},
		{map[string]any{"module": "Bad Name", "module_file": "/nonexistent"}, "module: must be 1 to 64"},
	} {
		c.handler["handler"] = "gateway_wasm"
		cfg, _ := json.Marshal(map[string]any{"admin": map[string]any{"disabled": true}, "apps": map[string]any{"http": map[string]any{"servers": map[string]any{
			"s": map[string]any{"listen": []string{fmt.Sprintf("127.0.0.1:%d", plugintest.FreePort(t))}, "routes": []any{map[string]any{"handle": []any{c.handler}}}},
		}}}})
		err := caddy.Load(cfg, true)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%v: got %v, want %q", c.handler, err, c.want)
		}
	}
}

func TestCaddyfileModuleFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.wasm")
	if err := os.WriteFile(path, pwtest.Compile(t, filter(pwtest.Faults)), 0o600); err != nil {
		t.Fatal(err)
	}
	g := plugintest.StartCaddyfile(t, `http://127.0.0.1:{PORT} {
	gateway_wasm {
		module file-filter
		module_file `+path+`
		config `+"`"+`{"a": 1}`+"`"+`
	}
	reverse_proxy {UP}
}`)
	res := g.Get("/")
	plugintest.WantStatus(t, res, 200)
	if res.Header.Get("X-Wasm") != "1" {
		t.Fatalf("headers %v", res.Header)
	}
}

// TestTrailers: the request trailers callback sees the client's trailers
// (the body is read to reach them) and can answer locally; the response
// trailers callback sees the upstream's trailers and adds one.
func TestTrailers(t *testing.T) {
	up := plugintest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Trailer", "X-Upstream-Trailer")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-Upstream-Trailer", "from-upstream")
	})
	g := start(t, filter(`
  (data (i32.const 1024) "x-t")
  (data (i32.const 1040) "x-wasm-trailer")
  (data (i32.const 1056) "seen")
  (data (i32.const 1072) "x-upstream-trailer")
  (func (export "proxy_on_request_trailers") (param $ctx i32) (param $n i32) (result i32)
    ;; a request trailer x-t: answer 299 with its value as the body
    (if (i32.eqz (call $get_map_value (i32.const 1) (i32.const 1024) (i32.const 3) (i32.const 512) (i32.const 516)))
      (then
        (drop (call $send_local (i32.const 299) (i32.const 0) (i32.const 0) (i32.load (i32.const 512)) (i32.load (i32.const 516)) (i32.const 0) (i32.const 0) (i32.const 0)))
        (return (i32.const 1))))
    (i32.const 0))
  (func (export "proxy_on_response_trailers") (param $ctx i32) (param $n i32) (result i32)
    ;; echo the upstream's trailer back in x-wasm-trailer
    (if (i32.eqz (call $get_map_value (i32.const 3) (i32.const 1072) (i32.const 18) (i32.const 512) (i32.const 516)))
      (then (call $add_ret (i32.const 3) (i32.const 1040) (i32.const 14)))
      (else (drop (call $add_map_value (i32.const 3) (i32.const 1040) (i32.const 14) (i32.const 1056) (i32.const 4)))))
    (i32.const 0))
`), nil, plugintest.WithUpstream(up))

	// Response trailers.
	res, err := http.Get(g.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(b) != "body" {
		t.Fatalf("response: %d %q", res.StatusCode, b)
	}
	if got := res.Trailer.Get("X-Wasm-Trailer"); got != "from-upstream" {
		t.Fatalf("trailers %v", res.Trailer)
	}

	// Request trailers: a chunked body with a trailer.
	req, _ := http.NewRequest("POST", g.URL+"/", io.MultiReader(strings.NewReader("chunked body")))
	req.ContentLength = -1
	req.Trailer = http.Header{"X-T": {"trailer-value"}}
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 299 || string(b) != "trailer-value" {
		t.Fatalf("request trailers: %d %q", res.StatusCode, b)
	}
	// Without the trailer the request goes upstream.
	plugintest.WantStatus(t, g.Do("POST", "/", strings.NewReader("no trailer")), 200)
}

// TestEventStreamBody: an event stream, which never ends, is handed to the
// response body callback at every flush (what the module pauses on comes
// with the next call), and what the module leaves reaches the client as
// it comes. So is any body of unknown length (a chunked log or watch
// stream), which was held whole until it ended: never, for such streams.
func TestEventStreamBody(t *testing.T) {
	for _, contentType := range []string{"text/event-stream", "text/plain; charset=utf-8"} {
		t.Run(contentType, func(t *testing.T) { streamedBody(t, contentType) })
	}
}

func streamedBody(t *testing.T, contentType string) {
	// pauses on a chunk of 9 bytes or less (each event is 9), appends to
	// the others
	g := start(t, filter(`
  (data (i32.const 1056) "|")
  (func (export "proxy_on_response_body") (param $ctx i32) (param $size i32) (param $eos i32) (result i32)
    (if (i32.le_u (local.get $size) (i32.const 9)) (then (return (i32.const 1))))
    (drop (call $set_buffer (i32.const 1) (local.get $size) (i32.const 0) (i32.const 1056) (i32.const 1)))
    (i32.const 0))
`), nil, plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		rc := http.NewResponseController(w)
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i%10); err != nil || rc.Flush() != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.URL+"/", nil)
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatalf("event stream: %v", err)
	}
	defer resp.Body.Close()
	want := "data: 0\n\ndata: 1\n\n|data: 2\n\ndata: 3\n\n|"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != want {
		t.Fatalf("stream %q (%v), want %q", got, err, want)
	}
}
