package httplog

// Test harness: an in-process Caddy (caddy.Load is process-global, so no
// t.Parallel) serving one route [plugins..., reverse_proxy → echo upstream].

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"
)

// echoed is what the echo upstream saw.
type echoed struct {
	Method  string      `json:"method"`
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Headers http.Header `json:"headers"`
}

// upstream starts an echo server answering with the request it received.
func upstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echoed{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Headers: r.Header})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCaddy loads a config serving [handlers..., reverse_proxy to up] and
// returns the base URL.
func startCaddy(t *testing.T, up *httptest.Server, handlers ...any) string {
	t.Helper()
	port := freePort(t)
	hs := append([]any{}, handlers...)
	hs = append(hs, map[string]any{
		"handler":   "reverse_proxy",
		"upstreams": []any{map[string]any{"dial": strings.TrimPrefix(up.URL, "http://")}},
	})
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"storage": map[string]any{"module": "file_system", "root": t.TempDir()},
		"apps": map[string]any{"http": map[string]any{"servers": map[string]any{"s": map[string]any{
			"listen":          []string{fmt.Sprintf("127.0.0.1:%d", port)},
			"routes":          []any{map[string]any{"handle": hs}},
			"automatic_https": map[string]any{"disable": true},
		}}}},
	}
	loadJSON(t, cfg)
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

func loadJSON(t *testing.T, cfg any) {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(b, true); err != nil {
		t.Fatalf("caddy.Load: %v", err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
}

// startCaddyfile adapts and loads a Caddyfile; {UP} and {PORT} are replaced.
func startCaddyfile(t *testing.T, up *httptest.Server, src string) string {
	t.Helper()
	port := freePort(t)
	src = strings.ReplaceAll(src, "{UP}", strings.TrimPrefix(up.URL, "http://"))
	src = strings.ReplaceAll(src, "{PORT}", fmt.Sprint(port))
	src = "{\n\tadmin off\n\tpersist_config off\n\tstorage file_system " + t.TempDir() + "\n\tlog {\n\t\tlevel ERROR\n\t}\n}\n" + src
	cfg, warn, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
	if err != nil {
		t.Fatalf("adapting Caddyfile: %v\n%s", err, src)
	}
	_ = warn
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("caddy.Load: %v\n%s", err, cfg)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

var client = &http.Client{Timeout: 10 * time.Second}

type result struct {
	Status int
	Header http.Header
	Body   string
	Echo   *echoed // when the upstream answered
	Error  string  // the {error} of a gateway answer
}

// do sends a request; hdr holds header pairs ("Name", "value", …).
func do(t *testing.T, method, url string, hdr ...string) result {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	res := result{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
	var e echoed
	if json.Unmarshal(b, &e) == nil && e.Method != "" {
		res.Echo = &e
	}
	var er struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &er) == nil {
		res.Error = er.Error
	}
	return res
}

// wantStatus fails unless res has the status.
func wantStatus(t *testing.T, res result, status int) {
	t.Helper()
	if res.Status != status {
		t.Fatalf("status %d, want %d; body %s", res.Status, status, res.Body)
	}
}

// wantGatewayError checks a gateway-made JSON error answer.
func wantGatewayError(t *testing.T, res result, status int) {
	t.Helper()
	wantStatus(t, res, status)
	if res.Error == "" || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("want a JSON {error} body, got %q (%s)", res.Body, res.Header.Get("Content-Type"))
	}
	if res.Echo != nil {
		t.Fatalf("request reached the upstream")
	}
}

// upstreamHeader returns a header the upstream received.
func upstreamHeader(t *testing.T, res result, name string) string {
	t.Helper()
	if res.Echo == nil {
		t.Fatalf("no upstream answer: %d %s", res.Status, res.Body)
	}
	return res.Echo.Headers.Get(name)
}
