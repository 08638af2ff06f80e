package tests

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm/pwtest"
)

// Streaming and upgraded responses through every plugin that wraps the
// response writer: an event stream that never ends must reach the client
// event by event, and a WebSocket must open (101, the connection
// hijacked through every wrapper) and keep working across a reload.

// bodyWAT is a module with request and response body callbacks that let
// everything continue (the wasm plugin buffers bodies for them).
const bodyWAT = `(module` + pwtest.Prelude + `  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "proxy_on_response_body") (param i32 i32 i32) (result i32) (i32.const 0)))
`

// streamingUpstream serves, under any prefix, /sse (an event every 100 ms
// until the client leaves) and /ws (a WebSocket echo).
func streamingUpstream(t testing.TB) *httptest.Server {
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/upload"):
			// tells the client (by key) when the first MiB came
			n, _ := io.CopyN(io.Discard, r.Body, 1<<20)
			if n == 1<<20 {
				if ch, ok := uploads.Load(r.URL.Query().Get("k")); ok {
					close(ch.(chan struct{}))
				}
			}
			m, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d", n+m)
		case strings.HasSuffix(r.URL.Path, "/sse"):
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			rc := http.NewResponseController(w)
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "data: event-%d\n\n", i); err != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
				select {
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		case strings.HasSuffix(r.URL.Path, "/duplex"):
			// each line of the request body answered as it arrives
			rc := http.NewResponseController(w)
			_ = rc.EnableFullDuplex()
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(200)
			_ = rc.Flush()
			sc := bufio.NewScanner(r.Body)
			for sc.Scan() {
				if _, err := fmt.Fprintf(w, "got:%s\n", sc.Text()); err != nil || rc.Flush() != nil {
					return
				}
			}
		case strings.HasSuffix(r.URL.Path, "/ws"):
			wsEcho(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // the Origin is the client app's
		default:
			http.NotFound(w, r)
		}
	})
	return up
}

// uploads are the channels upload tests wait on, by key.
var uploads sync.Map

// upload streams 8 MiB to url, the last 7 only once the upstream has read
// the first: a gateway that buffered the request body would never let it.
func upload(t *testing.T, client *http.Client, url string) {
	t.Helper()
	first := make(chan struct{})
	uploads.Store(url, first)
	defer uploads.Delete(url)
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 1<<20)
		pw.Write(chunk)
		select {
		case <-first:
		case <-time.After(15 * time.Second):
			pw.CloseWithError(fmt.Errorf("the upstream did not get the first MiB before the rest was sent"))
			return
		}
		for i := 1; i < 8; i++ {
			pw.Write(chunk)
		}
		pw.Close()
	}()
	resp, err := client.Post(url+"?k="+neturl.QueryEscape(url), "application/octet-stream", pr)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != fmt.Sprint(8<<20) {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
}

// readEvents reads n events of an event stream, failing after a generous
// deadline (the stream never ends: a buffering plugin shows as no event).
func readEvents(t *testing.T, client *http.Client, url string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Origin", "https://app.example")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	got := 0
	for got < n && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			got++
		}
	}
	if got < n {
		t.Fatalf("GET %s: %d of %d events before the deadline (%v): the stream is held back", url, got, n, sc.Err())
	}
}

// duplex sends, over HTTP/2, lines in a streamed request body, each only after the
// answer to the previous one came back: the request and response bodies
// must both stream, through the gateway, at the same time.
func duplex(t *testing.T, client *http.Client, url string, lines int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, pr)
	req.Header.Set("Content-Type", "text/plain")
	go io.WriteString(pw, "line-0\n") // read once the request is sent
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, resp.Proto)
	}
	sc := bufio.NewScanner(resp.Body)
	for i := 0; i < lines; i++ {
		if !sc.Scan() || sc.Text() != fmt.Sprintf("got:line-%d", i) {
			t.Fatalf("POST %s: answer %d %q (%v), want got:line-%d before the request ends", url, i, sc.Text(), sc.Err(), i)
		}
		if _, err := fmt.Fprintf(pw, "line-%d\n", i+1); err != nil {
			t.Fatal(err)
		}
	}
}

// streamingPlugins are the plugins that see the response (the wasm one
// running the module wat).
func streamingPlugins(t *testing.T, g *testgw.Gateway, collector, wat string) map[string]map[string]any {
	uploadModule(t, g, map[string]any{"name": "bodies", "wat": wat})
	return map[string]map[string]any{
		"none":                    nil,
		"request-id":              {},
		"cors":                    {"allow_origins": []string{"https://app.example"}},
		"rate-limit":              {"limit": 1000000, "window_s": 60},
		"request-size-limit":      {"max_bytes": 16 << 20},
		"proxy-cache":             {"content_types": []string{}},
		"response-transform":      {"set_headers": map[string]string{"X-Seen": "yes"}},
		"response-body-transform": {"replace": []map[string]any{{"pattern": "event", "with": "EVENT"}}, "content_types": []string{"text/*"}},
		"response-compression":    {"min_length": 1},
		"hsts":                    {},
		"wasm":                    {"module": "bodies"},
		"http-log":                {"endpoint": collector},
	}
}

// pluginRoutes gives each plugin a route of its own (/<type>), and all of
// them one together (/all); it returns the routes' names.
func pluginRoutes(t *testing.T, g *testgw.Gateway, sid int64, plugins map[string]map[string]any) []string {
	names := []string{"all"}
	all := g.Route("all", sid, testgw.Paths("/all"))
	for typ, cfg := range plugins {
		names = append(names, typ)
		rid := g.Route(typ, sid, testgw.Paths("/"+typ))
		if cfg != nil {
			addPlugin(t, g, typ, "route", rid, cfg)
			addPlugin(t, g, typ, "route", all, cfg)
		}
	}
	return names
}

// TestStreamingOverHTTP2: an HTTP/2 client (the HTTPS listener) gets an
// event stream event by event, and streams a request body while reading
// the answer (full duplex), through every plugin together.
func TestStreamingOverHTTP2(t *testing.T) {
	g, pool := startWithCert(t, "stream.test")
	httpsAddr := enableHTTPS(t, g)
	up := streamingUpstream(t)
	coll := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	sid := g.Service("s", testgw.Addr(up))
	// The module has a response body callback: a body of unknown length
	// reaches it chunk by chunk (docs/plugins.md), so an answer whose end
	// waits for the client's next line streams through it too.
	names := pluginRoutes(t, g, sid, streamingPlugins(t, g, coll.URL, bodyWAT))
	client := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "stream.test"}}}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			base := "https://" + httpsAddr + "/" + name
			readEvents(t, client, base+"/sse", 3)
			duplex(t, client, base+"/duplex", 5)
		})
	}
}

func TestStreamingThroughPlugins(t *testing.T) {
	g := testgw.Start(t, nil)
	up := streamingUpstream(t)
	var logged atomic.Int64
	coll := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		logged.Add(1)
		io.Copy(io.Discard, r.Body)
	})
	sid := g.Service("s", testgw.Addr(up))
	names := pluginRoutes(t, g, sid, streamingPlugins(t, g, coll.URL, bodyWAT))

	client := &http.Client{}
	for _, name := range names {
		t.Run("sse/"+name, func(t *testing.T) {
			readEvents(t, client, g.ProxyURL+"/"+name+"/sse", 3)
		})
		t.Run("upload/"+name, func(t *testing.T) {
			upload(t, client, g.ProxyURL+"/"+name+"/upload")
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conns := map[string]*websocket.Conn{}
	for _, name := range names {
		ws, resp, err := websocket.Dial(ctx, "ws://"+g.ProxyAddr+"/"+name+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://app.example"}}})
		if err != nil {
			st := 0
			if resp != nil {
				st = resp.StatusCode
			}
			t.Errorf("websocket through %s: %d %v", name, st, err)
			continue
		}
		defer ws.CloseNow()
		conns[name] = ws
	}
	echo := func(when string) {
		for name, ws := range conns {
			msg := name + "-" + when
			if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				t.Errorf("websocket %s write %s: %v", name, when, err)
				continue
			}
			if _, got, err := ws.Read(ctx); err != nil || string(got) != "echo:"+msg {
				t.Errorf("websocket %s read %s: %q %v", name, when, got, err)
			}
		}
	}
	echo("before")
	g.Service("unrelated", "127.0.0.1:9") // a reload
	echo("after-reload")
}
