package traffic

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/internal/memtest"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestRequestTransformTraffic(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-transform", `{
		"remove_headers":["X-Debug","X-Internal-*"],
		"rename_headers":{"X-Old":"X-New","X-Absent":"X-Never"},
		"set_headers":{"X-Client":"{http.request.remote.host}","X-Set":"set","Host":"upstream.example","X-Unknown":"\\{not.a.placeholder\\}","X-Json":"{\"a\": 1}"},
		"add_headers":{"X-Set":"added","X-Via":"gateway"},
		"remove_query":["debug"],
		"set_query":{"source":"gw","path":"{http.request.uri.path}"}}`)})
	res := g.Get("/p?debug=1&keep=a+b&source=client",
		"X-Debug", "1", "X-Internal-Token", "t", "X-Old", "old", "X-New", "replaced", "X-Set", "client", "Host", "client.example")
	plugintest.WantStatus(t, res, http.StatusOK)
	up := g.Upstream.Last()
	h := up.Header
	check := func(name string, want ...string) {
		t.Helper()
		got := h.Values(name)
		if len(got) != len(want) {
			t.Errorf("upstream %s = %q, want %q", name, got, want)
			return
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("upstream %s = %q, want %q", name, got, want)
			}
		}
	}
	check("X-Debug")
	check("X-Internal-Token")
	check("X-Old")
	check("X-New", "old")
	check("X-Never")
	check("X-Client", "127.0.0.1")
	check("X-Set", "set", "added")
	check("X-Via", "gateway")
	check("X-Unknown", "{not.a.placeholder}") // escaped braces are literal
	check("X-Json", `{"a": 1}`)               // braces that are not a placeholder are literal
	if up.Host != "upstream.example" {
		t.Errorf("upstream Host %q", up.Host)
	}
	u, _ := url.Parse(up.URI)
	q := u.Query()
	if u.Path != "/p" || q.Has("debug") || q.Get("keep") != "a b" || q.Get("source") != "gw" || q.Get("path") != "/p" || len(q) != 3 {
		t.Errorf("upstream URI %q", up.URI)
	}
}

func TestResponseTransformTraffic(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-transform", `{
		"remove_headers":["X-Powered-*","Server"],
		"rename_headers":{"X-Upstream-Time":"X-Time"},
		"set_headers":{"Cache-Control":"no-store","X-Path":"{http.request.uri.path}"},
		"add_headers":{"X-Served-By":"gateway","Cache-Control":"private"}}`)},
		plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Powered-By", "php")
			w.Header().Set("X-Powered-Engine", "x")
			w.Header().Set("Server", "apache")
			w.Header().Set("X-Upstream-Time", "12ms")
			w.Header().Set("Cache-Control", "public")
			w.Header().Add("X-Served-By", "upstream")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("body"))
		}))
	res := g.Get("/r")
	plugintest.WantStatus(t, res, http.StatusCreated)
	if res.Body != "body" {
		t.Fatalf("body %q", res.Body)
	}
	for name, want := range map[string][]string{
		"X-Powered-By":     nil,
		"X-Powered-Engine": nil,
		"Server":           nil,
		"X-Upstream-Time":  nil,
		"X-Time":           {"12ms"},
		"Cache-Control":    {"no-store", "private"},
		"X-Path":           {"/r"},
		"X-Served-By":      {"upstream", "gateway"},
	} {
		got := res.Header.Values(name)
		if len(got) != len(want) || (len(want) > 0 && (got[0] != want[0] || got[len(got)-1] != want[len(want)-1])) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// bigValue is a set_headers/add_headers value of 300 copies of the
// placeholder of the client's X-Big header (8,100 characters, under the
// 8,192 a value may have): a client header of n bytes makes it 300·n.
var bigValue = strings.Repeat("{http.request.header.X-Big}", 300)

// bigHeaders lets clients send 1 MiB of headers (Go's default; Caddy's is
// 16 KiB, with which one request of the tests below would still expand
// to 300 · 16 KiB = 4.8 MB a value).
var bigHeaders = plugintest.WithServer(map[string]any{"max_header_bytes": 1 << 20})

// TestRequestTransformValuesBounded: the values with placeholders of a
// request-transform expand to at most 64 KiB per request (exactly: a value
// of 65,536 bytes passes, one more byte is 431 naming the header), and a
// request that would make them larger costs about its own size, not its
// header times the repetitions (300 · 100 KB = 30 MB a value, 2.5 values).
func TestRequestTransformValuesBounded(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-transform", `{
		"set_headers":{"X-Echo":"`+bigValue+`","X-Static":"static"},
		"add_headers":{"X-Added":"`+bigValue+`"},
		"set_query":{"q":"`+bigValue[:4096/27*27]+`"}}`)}, bigHeaders)
	big := strings.Repeat("b", 100<<10)
	var res plugintest.Result
	n := memtest.Allocated(func() { res = g.Get("/", "X-Big", big) })
	plugintest.WantGatewayError(t, res, http.StatusRequestHeaderFieldsTooLarge)
	if !strings.Contains(res.Error, "header X-Echo") || !strings.Contains(res.Error, "65536 bytes") {
		t.Errorf("error %q does not name the header and the bound", res.Error)
	}
	if len(g.Upstream.Requests()) != 0 {
		t.Errorf("the upstream received the request")
	}
	// The request itself is about 100 KB through client, server and
	// gateway; without the bound the expanded values alone are 90 MB.
	if n > 8<<20 {
		t.Errorf("one request allocated %d MB", n>>20)
	}

	// The bound is exact, counts only what placeholders expand to (X-Static
	// is free), and is shared by the headers and the query.
	g = startGW(t, []string{plugintest.HandlerJSON(t, "request-transform", `{
		"set_headers":{"X-Two":"{http.request.header.X-Big}{http.request.header.X-Big}","X-Static":"static"},
		"set_query":{"m":"{http.request.method}"}}`)}, bigHeaders)
	res = g.Get("/", "X-Big", strings.Repeat("b", 32768-2))
	plugintest.WantStatus(t, res, http.StatusOK)
	if got := len(plugintest.UpstreamHeader(t, res, "X-Two")); got != 65536-4 || res.Echo.Query != "m=GET" {
		t.Errorf("upstream X-Two of %d bytes, query %q", got, res.Echo.Query)
	}
	res = g.Get("/", "X-Big", strings.Repeat("b", 32768-1))
	plugintest.WantGatewayError(t, res, http.StatusRequestHeaderFieldsTooLarge)
	if !strings.Contains(res.Error, "query parameter m") {
		t.Errorf("error %q does not name the query parameter", res.Error)
	}
	res = g.Get("/", "X-Big", strings.Repeat("b", 32768+1))
	plugintest.WantGatewayError(t, res, http.StatusRequestHeaderFieldsTooLarge)
	if !strings.Contains(res.Error, "header X-Two") {
		t.Errorf("error %q does not name the header", res.Error)
	}
}

// TestResponseTransformValuesBounded: past the 64 KiB of values with
// placeholders a response-transform may add for a request, the header that
// does not fit is left out (a set one removed, not the upstream's left);
// the response and its other headers are as they would be.
func TestResponseTransformValuesBounded(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "caddy.log")
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-transform", `{
		"set_headers":{"X-Echo":"`+bigValue+`","X-Method":"{http.request.method}","Cache-Control":"no-store"},
		"add_headers":{"X-Added":"`+bigValue+`","X-Via":"gw {http.request.uri.path}"}}`)},
		plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Echo", "upstream")
			w.Header().Set("X-Added", "upstream")
			_, _ = w.Write([]byte("body"))
		}), bigHeaders, plugintest.WithLogFile(logFile))
	big := strings.Repeat("b", 100<<10)
	var res plugintest.Result
	n := memtest.Allocated(func() { res = g.Get("/r", "X-Big", big) })
	plugintest.WantStatus(t, res, http.StatusOK)
	if res.Body != "body" {
		t.Errorf("body %q", res.Body)
	}
	for name, want := range map[string][]string{
		"X-Echo":        nil,
		"X-Added":       {"upstream"},
		"X-Method":      {"GET"},
		"X-Via":         {"gw /r"},
		"Cache-Control": {"no-store"},
	} {
		if got := res.Header.Values(name); !slices.Equal(got, want) {
			t.Errorf("%s = %.40q, want %q", name, got, want)
		}
	}
	if n > 8<<20 {
		t.Errorf("one request allocated %d MB", n>>20)
	}
	// The operator learns why, once a minute however many requests.
	res = g.Get("/r", "X-Big", big)
	logged, _ := os.ReadFile(logFile)
	if n := strings.Count(string(logged), `"msg":"response header left out`); n != 1 || !strings.Contains(string(logged), `"header":"X-Echo"`) {
		t.Errorf("%d warnings about a header left out, want 1 naming X-Echo; log:\n%.2000s", n, logged)
	}

	// A small header: everything is there.
	res = g.Get("/r", "X-Big", "b")
	if got := res.Header.Get("X-Echo"); got != strings.Repeat("b", 300) {
		t.Errorf("X-Echo = %q", got)
	}
	if got := res.Header.Values("X-Added"); len(got) != 2 || got[1] != strings.Repeat("b", 300) {
		t.Errorf("X-Added = %q", got)
	}
}
