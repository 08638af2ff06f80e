package gwproxy_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/reqtest"
	"github.com/caddy-gateway/gateway/modules/gwproxy"
	_ "github.com/caddy-gateway/gateway/modules/router" // the gateway transport and selection policy
)

// front provisions a gateway_proxy from cfg and serves it the way the
// gateway's proxy listener does (Caddy's request preparation first).
// trusted marks every peer a trusted proxy. A request header
// X-Before-Proxy: v makes it set the response header X-Before-Proxy: v
// before proxying, as a plugin setting a header for the final response
// does.
func front(t *testing.T, cfg string, trusted bool) (*gwproxy.Handler, *httptest.Server, context.CancelFunc) {
	t.Helper()
	h := new(gwproxy.Handler)
	if err := json.Unmarshal([]byte(cfg), h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := &caddyhttp.Server{}
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, srv)
		caddyhttp.SetVar(r.Context(), caddyhttp.TrustedProxyVarKey, trusted)
		if v := r.Header.Get("X-Before-Proxy"); v != "" {
			w.Header().Set("X-Before-Proxy", v)
		}
		if err := h.ServeHTTP(w, r, nil); err != nil {
			var he caddyhttp.HandlerError
			if ok := asHandlerError(err, &he); ok {
				w.WriteHeader(he.StatusCode)
				return
			}
			w.WriteHeader(500)
		}
	}))
	t.Cleanup(gw.Close)
	return h, gw, func() { _ = h.Cleanup(); cancel() }
}

func asHandlerError(err error, he *caddyhttp.HandlerError) bool {
	e, ok := err.(caddyhttp.HandlerError)
	if ok {
		*he = e
	}
	return ok
}

func addr(s *httptest.Server) string { return s.Listener.Addr().String() }

// send sends a request (reqtest.New) with the default client and reads
// the whole answer (reqtest.Do): the response, trailers included, and
// its body.
func send(t *testing.T, method, url string, body io.Reader, hdr ...string) (*http.Response, string) {
	t.Helper()
	res, b := reqtest.Do(t, http.DefaultClient, reqtest.New(t, method, url, body, hdr...))
	return res, string(b)
}

// deadAddr is a 127.0.0.1 address nothing listens on any more.
func deadAddr(t *testing.T) string {
	s := httptest.NewServer(http.NotFoundHandler())
	s.Close()
	return addr(s)
}

func TestHeadersBothWays(t *testing.T) {
	var got http.Header
	var gotHost string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotHost = r.Header.Clone(), r.Host
		w.Header().Set("X-Up", "1")
		w.Header().Set("Connection", "X-Private")
		w.Header().Set("X-Private", "secret")
		w.Header().Set("Keep-Alive", "timeout=5")
		_, _ = io.WriteString(w, "body")
	}))
	defer up.Close()
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()

	res, body := send(t, "GET", gw.URL+"/a?b=c", nil, "Host", "api.example.com",
		"X-Forwarded-For", "203.0.113.9", "X-Forwarded-Host", "evil.example",
		"Connection", "X-Hop", "X-Hop", "drop me", "Proxy-Authorization", "Basic x")
	if body != "body" || res.Header.Get("X-Up") != "1" {
		t.Fatalf("answer %q, headers %v", body, res.Header)
	}
	if res.Header.Get("X-Private") != "" || res.Header.Get("Keep-Alive") != "" {
		t.Fatalf("hop-by-hop response headers went to the client: %v", res.Header)
	}
	if res.Header.Get("Via") != "1.1 Caddy" {
		t.Fatalf("Via = %q", res.Header.Get("Via"))
	}
	// an untrusted peer's X-Forwarded-* are replaced; the Host is the client's
	if got.Get("X-Forwarded-For") != "127.0.0.1" || got.Get("X-Forwarded-Host") != "api.example.com" ||
		got.Get("X-Forwarded-Proto") != "http" || gotHost != "api.example.com" {
		t.Fatalf("upstream saw Host %q, headers %v", gotHost, got)
	}
	if got.Get("X-Hop") != "" || got.Get("Proxy-Authorization") != "" || got.Get("Connection") != "" {
		t.Fatalf("hop-by-hop request headers reached the target: %v", got)
	}
	if _, ok := got["User-Agent"]; ok && got.Get("User-Agent") != "Go-http-client/1.1" {
		t.Fatalf("User-Agent = %q", got.Get("User-Agent"))
	}
}

func TestTrustedPeerKeepsForwardedChain(t *testing.T) {
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer up.Close()
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), true)
	defer stop()
	send(t, "GET", gw.URL, nil,
		"X-Forwarded-For", "203.0.113.9", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "public.example")
	if got.Get("X-Forwarded-For") != "203.0.113.9, 127.0.0.1" || got.Get("X-Forwarded-Proto") != "https" || got.Get("X-Forwarded-Host") != "public.example" {
		t.Fatalf("trusted peer's chain: %v", got)
	}
}

// A request that has passed through 16 Caddy proxies (Via entries,
// separate or folded, with or without a comment) is not forwarded again:
// 508. Other proxies' entries do not count.
func TestLoopDetectedByVia(t *testing.T) {
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer up.Close()
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()
	caddies := func(n int) string { return strings.TrimSuffix(strings.Repeat("1.1 Caddy, ", n), ", ") }
	for _, tc := range []struct {
		via    []string
		status int
	}{
		{[]string{caddies(15)}, 200},
		{[]string{caddies(15), "1.1 varnish, 1.1 google, 2 cdn.example (Caddy)"}, 200},
		{[]string{caddies(16)}, 508},
		{[]string{caddies(10), caddies(5), "2.0 Caddy (the gateway)"}, 508},
	} {
		var hdr []string
		for _, v := range tc.via {
			hdr = append(hdr, "Via", v)
		}
		before := reached.Load()
		res, body := send(t, "GET", gw.URL, nil, hdr...)
		if res.StatusCode != tc.status {
			t.Fatalf("Via %q: %d %s, want %d", tc.via, res.StatusCode, body, tc.status)
		}
		if forwarded := reached.Load() > before; forwarded != (tc.status == 200) {
			t.Fatalf("Via %q: forwarded %v", tc.via, forwarded)
		}
	}
}

// The Host header operation sees the chosen target (the gateway's rule
// for routes without preserve_host). A Set of Host alone (what the
// compiler emits) is resolved without the header operations' machinery:
// with another operation beside it (the general path) every value gives
// the same Host.
func TestHostFromTarget(t *testing.T) {
	var gotHost string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { gotHost = r.Host }))
	defer up.Close()
	for _, tc := range []struct{ value, want string }{
		{"{http.reverse_proxy.upstream.hostport}", addr(up)},
		{"static.example:8080", "static.example:8080"},
		{"{http.request.host}.upstream", "api.example.com.upstream"},
		{"", addr(up)}, // an empty Host: the dial address
	} {
		for _, extra := range []string{"", `, "add": {"X-Extra": ["1"]}`} {
			_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}],
				"headers": {"request": {"set": {"Host": [%q]}%s}}}`, addr(up), tc.value, extra), false)
			gotHost = ""
			send(t, "GET", gw.URL, nil, "Host", "api.example.com")
			stop()
			if gotHost != tc.want {
				t.Errorf("Host set to %q (extra %q): upstream Host = %q, want %q", tc.value, extra, gotHost, tc.want)
			}
		}
	}
}

// A target that refuses connections costs a retry on another target and
// a passive failure; max_fails of them take it out of rotation, which
// PassiveHealth reports.
func TestRetriesAndPassiveHealth(t *testing.T) {
	var served atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	defer up.Close()
	dead := deadAddr(t)
	h, gw, stop := front(t, fmt.Sprintf(`{
		"upstreams": [{"dial": %q}, {"dial": %q}],
		"load_balancing": {"retries": 1, "selection_policy": {"policy": "gateway", "algorithm": "round_robin"}},
		"health_checks": {"passive": {"fail_duration": "1m", "max_fails": 2}}}`, dead, addr(up)), false)
	defer stop()
	for i := 0; i < 6; i++ {
		res, _ := send(t, "POST", gw.URL, strings.NewReader("a body"), "Content-Type", "text/plain")
		if res.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, res.StatusCode)
		}
	}
	if served.Load() != 6 {
		t.Fatalf("served %d of 6", served.Load())
	}
	fails, down := h.PassiveHealth(dead)
	if fails != 2 || !down {
		t.Fatalf("dead target: %d fails, down %v", fails, down)
	}
	if fails, down := h.PassiveHealth(addr(up)); fails != 0 || down {
		t.Fatalf("live target: %d fails, down %v", fails, down)
	}
}

// Without retries a refused connection is a 502; when every target is
// out of rotation the answer is 503.
func TestFailureStatuses(t *testing.T) {
	dead := deadAddr(t)
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}],
		"health_checks": {"passive": {"fail_duration": "1m", "max_fails": 1}}}`, dead), false)
	defer stop()
	for _, want := range []int{502, 503} {
		res, _ := send(t, "GET", gw.URL, nil)
		if res.StatusCode != want {
			t.Fatalf("got %d, want %d", res.StatusCode, want)
		}
	}
}

// A target slower than the transport's read timeout is a 504; a POST is
// not retried after the request was sent.
func TestReadTimeout(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-release
	}))
	defer slow.Close()
	defer close(release)
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}, {"dial": %q}],
		"transport": {"protocol": "gateway_http", "response_header_timeout": "100ms"},
		"load_balancing": {"retries": 1}}`, addr(slow), addr(slow)), false)
	defer stop()
	res, _ := send(t, "POST", gw.URL, strings.NewReader("x"), "Content-Type", "text/plain")
	if res.StatusCode != 504 || calls.Load() != 1 {
		t.Fatalf("status %d after %d calls, want 504 after 1", res.StatusCode, calls.Load())
	}
}

// Event streams reach the client event by event; trailers follow the
// body.
func TestStreamingAndTrailers(t *testing.T) {
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/trailer" {
			w.Header().Set("Trailer", "X-Sum")
			_, _ = io.WriteString(w, "data")
			w.Header().Set("X-Sum", "42")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 2; i++ {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			<-next
		}
	}))
	defer up.Close()
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()

	res, err := http.Get(gw.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(res.Body)
	for i := 0; i < 2; i++ {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		_, _ = br.ReadString('\n')
		next <- struct{}{}
	}
	res.Body.Close()

	res, body := send(t, "GET", gw.URL+"/trailer", nil)
	if body != "data" || res.Trailer.Get("X-Sum") != "42" {
		t.Fatalf("body %q, trailers %v", body, res.Trailer)
	}
}

// An upgraded connection is tunnelled both ways, and stays open after the
// handler's config is cleaned up while stream_close_delay runs.
func TestUpgradeTunnelOutlivesCleanup(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "echo")
		w.WriteHeader(http.StatusSwitchingProtocols)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = brw.Flush()
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = brw.WriteString("echo " + line)
			_ = brw.Flush()
		}
	}))
	defer up.Close()
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}], "stream_close_delay": "1h"}`, addr(up)), false)

	conn, err := net.Dial("tcp", addr(gw))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	roundTrip := func(msg string) {
		t.Helper()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "%s\n", msg)
		line, err := br.ReadString('\n')
		if err != nil || line != "echo "+msg+"\n" {
			t.Fatalf("tunnel answered %q, %v", line, err)
		}
	}
	roundTrip("before")
	stop() // the config that opened the tunnel is unloaded
	roundTrip("after")
}

// The handler takes the configuration compileProxy writes for
// reverse_proxy, and refuses what it cannot honour.
func TestValidate(t *testing.T) {
	for _, cfg := range []string{
		`{"upstreams": [{"dial": "127.0.0.1:1", "max_requests": 5}]}`,
		`{"upstreams": [{"dial": "unix//tmp/up.sock"}]}`, // the outbound URL's host cannot name a socket
		`{"upstreams": [{"dial": "tcp/127.0.0.1:1"}]}`,
		`{"upstreams": [{"dial": "127.0.0.1"}]}`,
	} {
		h := new(gwproxy.Handler)
		if err := json.Unmarshal([]byte(cfg), h); err != nil {
			t.Fatal(err)
		}
		if err := h.Validate(); err == nil {
			t.Fatalf("accepted %s", cfg)
		}
	}
	ok := new(gwproxy.Handler)
	if err := json.Unmarshal([]byte(`{"upstreams": [{"dial": "127.0.0.1:1"}, {"dial": "[::1]:1"}, {"dial": "api.internal:8080"}]}`), ok); err != nil {
		t.Fatal(err)
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

// rawRequest sends req as written to the gateway on a fresh connection
// and reads the answer.
func rawRequest(t *testing.T, gw *httptest.Server, req string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr(gw))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(res.Body)
	res.Body.Close()
	return res
}

// The scheme of an absolute-form request line is not the client's to
// choose: https:// to a plain target is proxied in clear (not a failed
// TLS handshake counted against the target), and the user info is not
// forwarded.
func TestAbsoluteFormSchemeIgnored(t *testing.T) {
	var auth atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
	}))
	defer up.Close()
	h, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}],
		"health_checks": {"passive": {"fail_duration": "1m", "max_fails": 1}}}`, addr(up)), false)
	defer stop()
	for _, target := range []string{"https://x/a", "https://user:pw@x/a", "http://x/a"} {
		res := rawRequest(t, gw, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", target, res.StatusCode)
		}
		if a, _ := auth.Load().(string); a != "" {
			t.Fatalf("GET %s: the target got Authorization %q", target, a)
		}
	}
	if fails, _ := h.PassiveHealth(addr(up)); fails != 0 {
		t.Fatalf("the client's scheme counted %d failures against the target", fails)
	}
}

// A client's broken request body is the client's failure: a 400 (499
// when the client left), no passive failure against the target, no
// retry on another target.
func TestBrokenClientBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(conn net.Conn)
	}{
		{"malformed chunk", func(conn net.Conn) {
			_, _ = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nZZ\r\n")
		}},
		{"short body, client closes", func(conn net.Conn) {
			// Content-Length 100, 3 bytes sent, the client closes its side
			_, _ = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
			_ = conn.(*net.TCPConn).CloseWrite()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				_, _ = io.ReadAll(r.Body)
			})
			up1, up2 := httptest.NewServer(serve), httptest.NewServer(serve)
			defer up1.Close()
			defer up2.Close()
			h, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}, {"dial": %q}],
				"load_balancing": {"retries": 1, "selection_policy": {"policy": "gateway", "algorithm": "round_robin"}},
				"health_checks": {"passive": {"fail_duration": "1m", "max_fails": 1}}}`, addr(up1), addr(up2)), false)
			defer stop()

			conn, err := net.Dial("tcp", addr(gw))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			tc.send(conn)
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 400 && res.StatusCode != 499 {
				t.Fatalf("status %d, want 400 or 499", res.StatusCode)
			}
			if n := calls.Load(); n > 1 {
				t.Fatalf("a broken client body was retried: %d attempts", n)
			}
			for _, a := range []string{addr(up1), addr(up2)} {
				if fails, down := h.PassiveHealth(a); fails != 0 || down {
					t.Fatalf("target %s: %d failures counted for the client's body", a, fails)
				}
			}
		})
	}
}

// When a retry finds every target out of rotation, the answer is the
// last attempt's failure (502 for a refused connection, 504 for a
// timeout), not a 500.
func TestRetryWithNoTargetLeft(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer slow.Close()
	defer close(release) // before Close, which waits for the stalled handler
	for _, tc := range []struct {
		name, target, transport string
		want                    int
	}{
		{"refused", deadAddr(t), `{"protocol": "gateway_http"}`, 502},
		{"timeout", addr(slow), `{"protocol": "gateway_http", "response_header_timeout": "100ms"}`, 504},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}], "transport": %s,
				"load_balancing": {"retries": 1},
				"health_checks": {"passive": {"fail_duration": "1m", "max_fails": 1}}}`, tc.target, tc.transport), false)
			defer stop()
			res, _ := send(t, "GET", gw.URL, nil)
			if res.StatusCode != tc.want {
				t.Fatalf("got %d, want %d", res.StatusCode, tc.want)
			}
		})
	}
}

// A GET whose body was (partly) sent to a target that then failed is not
// retried: the body cannot be sent again. The selection policy never
// picks a tried target again, so a retry would reach the live one.
func TestGetWithSentBodyNotRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // reads the whole request, then hangs up without an answer
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				_, _ = io.ReadAll(req.Body)
			}
			c.Close()
		}
	}()
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer up.Close()
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}, {"dial": %q}],
		"load_balancing": {"retries": 1, "selection_policy": {"policy": "gateway", "algorithm": "round_robin"}}}`,
		ln.Addr().String(), addr(up)), false)
	defer stop()
	res, _ := send(t, "GET", gw.URL, strings.NewReader("a body"))
	if res.StatusCode != 502 || calls.Load() != 0 {
		t.Fatalf("status %d, %d retries; want 502 and none", res.StatusCode, calls.Load())
	}
}

// An h2c upgrade is not passed on to the target (smuggling): the request
// goes as a plain one.
func TestH2CUpgradeNotForwarded(t *testing.T) {
	var upgrade atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upgrade.Store(r.Header.Get("Upgrade") + "|" + r.Header.Get("Connection"))
	}))
	defer up.Close()
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()
	res := rawRequest(t, gw, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if got, _ := upgrade.Load().(string); got != "|" {
		t.Fatalf("the target got Upgrade|Connection %q", got)
	}
}

// The target's Via comes before ours.
func TestViaOrder(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Via", "1.0 cache")
	}))
	defer up.Close()
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()
	res, _ := send(t, "GET", gw.URL, nil)
	if got := strings.Join(res.Header.Values("Via"), ", "); got != "1.0 cache, 1.1 Caddy" {
		t.Fatalf("Via = %q", got)
	}
}

// A proxy whose Provision failed releases no target state on Cleanup: a
// live proxy's failure counters stay shared with the next proxy of the
// same address.
func TestCleanupAfterFailedProvision(t *testing.T) {
	dead := deadAddr(t)
	cfg := fmt.Sprintf(`{"upstreams": [{"dial": %q}],
		"health_checks": {"passive": {"fail_duration": "1m", "max_fails": 5}}}`, dead)
	_, gw, stop := front(t, cfg, false)
	defer stop()
	send(t, "GET", gw.URL, nil)

	bad := new(gwproxy.Handler)
	if err := json.Unmarshal([]byte(fmt.Sprintf(`{"upstreams": [{"dial": %q}], "transport": {"protocol": "no_such"}}`, dead)), bad); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	if err := bad.Provision(ctx); err == nil {
		t.Fatal("provisioned an unknown transport")
	}
	_ = bad.Cleanup()
	cancel()

	next, _, stop2 := front(t, cfg, false)
	defer stop2()
	if fails, _ := next.PassiveHealth(dead); fails != 1 {
		t.Fatalf("the next proxy sees %d failures, want the live proxy's 1", fails)
	}
}

// A GET whose body nothing has read yet (the first target refused the
// connection) is retried, and the next target gets the whole body.
func TestGetWithUnreadBodyRetried(t *testing.T) {
	var got atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
	}))
	defer up.Close()
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}, {"dial": %q}],
		"load_balancing": {"retries": 1, "selection_policy": {"policy": "gateway", "algorithm": "round_robin"}}}`,
		deadAddr(t), addr(up)), false)
	defer stop()
	for i := 0; i < 2; i++ { // round robin: one of the two starts at the dead target
		got.Store("")
		res, _ := send(t, "GET", gw.URL, strings.NewReader("a body"))
		if b, _ := got.Load().(string); res.StatusCode != 200 || b != "a body" {
			t.Fatalf("request %d: status %d, the target got body %q", i, res.StatusCode, b)
		}
	}
}

// An absolute-form http:// request to a TLS target goes out over TLS
// (never in clear, which a TLS target would also refuse) and the URL's
// user info does not reach the target; the target stays in rotation.
func TestAbsoluteFormHTTPToTLSTarget(t *testing.T) {
	type seen struct {
		tls  bool
		auth string
	}
	var got atomic.Value
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(seen{r.TLS != nil, r.Header.Get("Authorization")})
	}))
	up.Config.ErrorLog = log.New(io.Discard, "", 0) // a cleartext request is logged as a handshake error
	defer up.Close()
	ca := base64.StdEncoding.EncodeToString(up.Certificate().Raw)
	h, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}],
		"transport": {"protocol": "gateway_http", "tls": {"ca": {"provider": "inline", "trusted_ca_certs": [%q]}}},
		"health_checks": {"passive": {"fail_duration": "1m", "max_fails": 1}}}`, addr(up), ca), false)
	defer stop()
	for _, target := range []string{"http://x/a", "http://user:pw@x/a", "https://user:pw@x/a"} {
		got.Store(seen{})
		res := rawRequest(t, gw, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		s, _ := got.Load().(seen)
		if res.StatusCode != 200 || !s.tls {
			t.Fatalf("GET %s: status %d, the target saw TLS %v", target, res.StatusCode, s.tls)
		}
		if s.auth != "" {
			t.Fatalf("GET %s: the target got Authorization %q", target, s.auth)
		}
	}
	if fails, _ := h.PassiveHealth(addr(up)); fails != 0 {
		t.Fatalf("the client's scheme counted %d failures against the target", fails)
	}
}

// informationalUpstream answers every request with the 1xx codes listed
// in its query (?1xx=100,102,103), each with a Link header naming it and
// a hop-by-hop header, then 200.
func informationalUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body first, as a target taking a POST does: one that
		// answered without it would leave the gateway no reason to read
		// the client's body, and so to send its 100 Continue.
		_, _ = io.Copy(io.Discard, r.Body)
		for _, c := range strings.Split(r.URL.Query().Get("1xx"), ",") {
			var code int
			if _, err := fmt.Sscan(c, &code); err != nil {
				continue
			}
			h := w.Header()
			h.Set("Link", fmt.Sprintf("</%d.css>; rel=preload", code))
			h.Set("Connection", "X-Hop")
			h.Set("X-Hop", "drop me")
			w.WriteHeader(code)
		}
		clear(w.Header())
		w.Header().Set("X-Up", "final")
		_, _ = io.WriteString(w, "body")
	}))
	t.Cleanup(up.Close)
	return up
}

// get1xx sends a GET through the gateway (with X-Before-Proxy) and
// describes every 1xx the client got (code and headers) and the final
// answer.
func get1xx(t *testing.T, url string) (informational []string, res *http.Response, body string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Before-Proxy", "plugin")
	return send1xx(t, req)
}

// send1xx sends req and describes every 1xx the client got (code and
// headers) and the final answer.
func send1xx(t *testing.T, req *http.Request) (informational []string, res *http.Response, body string) {
	t.Helper()
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		informational = append(informational, fmt.Sprintf("%d Link=%q X-Hop=%q X-Before-Proxy=%q",
			code, h.Get("Link"), h.Get("X-Hop"), h.Get("X-Before-Proxy")))
		return nil
	}}
	res, b := reqtest.Do(t, http.DefaultClient, req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	return informational, res, string(b)
}

// A target's 102 and 103 reach the client before the final response,
// each with its own headers only; 100 Continue is the server's own
// business and is not repeated; the headers set for the final response
// before proxying are in the final response and not in the 1xx.
func TestInformationalResponsesForwarded(t *testing.T) {
	up := informationalUpstream(t)
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()

	got, res, body := get1xx(t, gw.URL+"/?1xx=100,102,103")
	want := []string{
		`102 Link="</102.css>; rel=preload" X-Hop="" X-Before-Proxy=""`,
		`103 Link="</103.css>; rel=preload" X-Hop="" X-Before-Proxy=""`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the client got the informational responses\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.StatusCode != 200 || body != "body" || res.Header.Get("X-Up") != "final" ||
		res.Header.Get("X-Before-Proxy") != "plugin" || res.Header.Get("Link") != "" {
		t.Fatalf("final answer %d %q, headers %v", res.StatusCode, body, res.Header)
	}
}

// A target that never stops sending informational responses fails the
// attempt once it has sent more than the gateway forwards.
func TestTooManyInformationalResponses(t *testing.T) {
	up := informationalUpstream(t)
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()

	many := strings.TrimSuffix(strings.Repeat("103,", 11), ",")
	got, res, _ := get1xx(t, gw.URL+"/?1xx="+many)
	if len(got) != 10 || res.StatusCode != http.StatusBadGateway {
		t.Fatalf("the client got %d informational responses and %d, want 10 and 502", len(got), res.StatusCode)
	}
	// ten is fine
	got, res, _ = get1xx(t, gw.URL+"/?1xx="+strings.TrimSuffix(strings.Repeat("103,", 10), ","))
	if len(got) != 10 || res.StatusCode != 200 {
		t.Fatalf("the client got %d informational responses and %d, want 10 and 200", len(got), res.StatusCode)
	}
}

// A client waiting for 100 Continue gets the server's own 100 and the
// final response, and no informational response of the target's.
func TestNoInformationalResponsesWhileExpectingContinue(t *testing.T) {
	up := informationalUpstream(t)
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()

	req, _ := http.NewRequest("POST", gw.URL+"/?1xx=103", strings.NewReader("abcd"))
	req.Header.Set("Expect", "100-continue")
	got, res, body := send1xx(t, req)
	if len(got) != 1 || !strings.HasPrefix(got[0], "100 ") || res.StatusCode != 200 || body != "body" {
		t.Fatalf("informational %q, then %d %q", got, res.StatusCode, body)
	}
}
