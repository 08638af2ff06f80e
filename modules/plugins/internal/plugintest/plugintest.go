// Package plugintest is the test harness shared by the plugin packages: an
// in-process Caddy serving one route [plugin handlers..., reverse_proxy →
// upstream] on 127.0.0.1, an upstream that records what it received, and
// helpers to send requests and check answers.
//
// caddy.Load is process-global: tests using the harness never run in
// parallel, and each loads its own config (a later Start replaces it).
// Packages using it call Main from their TestMain. It has no tests of its
// own: the plugin packages' tests exercise it.
package plugintest

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-gateway/gateway/internal/certtest"
	"github.com/caddy-gateway/gateway/internal/reqtest"
)

// storageDir is Caddy's storage for the whole test binary rather than a
// t.TempDir: the tls app cleans its storage in the background after a
// config stops, which would race with removing a per-test directory.
var (
	storageOnce sync.Once
	storageDir  string
	storageErr  error
)

// Main runs the tests of a package using the harness, then stops Caddy and
// removes its storage. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	_ = caddy.Stop()
	if storageDir != "" {
		_ = os.RemoveAll(storageDir)
	}
	os.Exit(code)
}

func storage(t *testing.T) string {
	t.Helper()
	storageOnce.Do(func() { storageDir, storageErr = os.MkdirTemp("", "plugintest-") })
	if storageErr != nil {
		t.Fatal(storageErr)
	}
	return storageDir
}

// Seen is what the upstream received; the echo upstream answers with it as
// JSON.
type Seen struct {
	Method  string      `json:"method"`
	URI     string      `json:"uri"`
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Host    string      `json:"host"`
	Header  http.Header `json:"header"`
	Body    string      `json:"body"`
	BodyErr string      `json:"body_error"`
}

// Upstream is an HTTP server recording every request it receives.
type Upstream struct {
	*httptest.Server
	t *testing.T

	mu   sync.Mutex
	reqs []Seen
}

// NewUpstream starts an upstream that records each request then hands it to
// h (with the body still readable), or, when h is nil, answers with the
// Seen record as JSON.
func NewUpstream(t *testing.T, h http.HandlerFunc) *Upstream {
	t.Helper()
	u := &Upstream{t: t}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := u.record(r)
		if h == nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(s)
			return
		}
		r.Body = io.NopCloser(strings.NewReader(s.Body))
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// Addr is the upstream's host:port, as reverse_proxy dials it.
func (u *Upstream) Addr() string { return u.Listener.Addr().String() }

func (u *Upstream) record(r *http.Request) Seen {
	s := Seen{Method: r.Method, URI: r.RequestURI, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host, Header: r.Header.Clone()}
	b, err := io.ReadAll(r.Body)
	s.Body = string(b)
	if err != nil {
		s.BodyErr = err.Error()
	}
	u.mu.Lock()
	u.reqs = append(u.reqs, s)
	u.mu.Unlock()
	return s
}

// Requests returns what the upstream received, in order.
func (u *Upstream) Requests() []Seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Seen(nil), u.reqs...)
}

// Last is the last request the upstream received (fails when none).
func (u *Upstream) Last() Seen {
	u.t.Helper()
	s := u.Requests()
	if len(s) == 0 {
		u.t.Fatal("upstream received no request")
	}
	return s[len(s)-1]
}

// Gateway is a running Caddy with one route in front of an upstream.
type Gateway struct {
	t        *testing.T
	URL      string // plain HTTP
	TLSURL   string // HTTPS (only with WithTLS)
	Client   *http.Client
	Upstream *Upstream
}

// Option changes what Start and StartCaddyfile load.
type Option func(*options)

type options struct {
	upstream *Upstream
	handler  http.HandlerFunc
	port     int
	tls      bool
	server   map[string]any
	logFile  string
}

// WithUpstream proxies to u instead of a new echo upstream.
func WithUpstream(u *Upstream) Option { return func(o *options) { o.upstream = u } }

// WithUpstreamFunc proxies to a new upstream that records each request then
// hands it to h.
func WithUpstreamFunc(h http.HandlerFunc) Option { return func(o *options) { o.handler = h } }

// WithPort listens on port instead of a free one (a reload keeps the
// address).
func WithPort(port int) Option { return func(o *options) { o.port = port } }

// WithTLS adds an HTTPS server (self-signed certificate for 127.0.0.1 and
// localhost) with the same route. Start only.
func WithTLS() Option { return func(o *options) { o.tls = true } }

// WithServer adds keys to the server objects, e.g. "trusted_proxies".
// Start only.
func WithServer(keys map[string]any) Option { return func(o *options) { o.server = keys } }

// WithLogFile writes Caddy's logs of level WARN and above to path, as JSON
// lines (the default: ERROR and above, to stderr).
func WithLogFile(path string) Option { return func(o *options) { o.logFile = path } }

func (o *options) apply(t *testing.T, opts []Option) {
	t.Helper()
	for _, opt := range opts {
		opt(o)
	}
	if o.upstream == nil {
		o.upstream = NewUpstream(t, o.handler)
	}
	if o.port == 0 {
		o.port = FreePort(t)
	}
}

// Start loads a config whose route runs handlers (each marshaled to JSON: a
// map, or a json.RawMessage) then reverse_proxy to the upstream.
func Start(t *testing.T, handlers []any, opts ...Option) *Gateway {
	t.Helper()
	var o options
	o.apply(t, opts)
	route := []any{map[string]any{"handle": append(append([]any{}, handlers...), map[string]any{
		"handler":   "reverse_proxy",
		"upstreams": []any{map[string]any{"dial": o.upstream.Addr()}},
	})}}
	server := func(port int) map[string]any {
		s := map[string]any{
			"listen":          []string{fmt.Sprintf("127.0.0.1:%d", port)},
			"routes":          route,
			"automatic_https": map[string]any{"disable": true},
		}
		for k, v := range o.server {
			s[k] = v
		}
		return s
	}
	g := &Gateway{t: t, URL: fmt.Sprintf("http://127.0.0.1:%d", o.port), Upstream: o.upstream}
	servers := map[string]any{"plain": server(o.port)}
	apps := map[string]any{"http": map[string]any{"servers": servers}}
	if o.tls {
		tlsPort := FreePort(t)
		g.TLSURL = fmt.Sprintf("https://127.0.0.1:%d", tlsPort)
		secure := server(tlsPort)
		secure["tls_connection_policies"] = []any{map[string]any{}}
		servers["secure"] = secure
		certPEM, keyPEM, _ := certtest.SelfSigned(t, "localhost", "127.0.0.1")
		apps["tls"] = map[string]any{"certificates": map[string]any{"load_pem": []any{
			map[string]any{"certificate": certPEM, "key": keyPEM},
		}}}
	}
	defaultLog := map[string]any{"level": "ERROR"}
	if o.logFile != "" {
		defaultLog = map[string]any{"level": "WARN", "encoder": map[string]any{"format": "json"},
			"writer": map[string]any{"output": "file", "filename": o.logFile}}
	}
	cfg, err := json.Marshal(map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": defaultLog}},
		"storage": map[string]any{"module": "file_system", "root": storage(t)},
		"apps":    apps,
	})
	if err != nil {
		t.Fatal(err)
	}
	g.load(cfg)
	return g
}

// StartCaddyfile adapts and loads a Caddyfile (site blocks; the global
// options are the harness's), with {UP} replaced by the upstream's address
// and {PORT} by the port that URL uses.
func StartCaddyfile(t *testing.T, src string, opts ...Option) *Gateway {
	t.Helper()
	var o options
	o.apply(t, opts)
	if o.tls || o.server != nil {
		t.Fatal("plugintest: WithTLS and WithServer apply to Start only")
	}
	src = strings.ReplaceAll(src, "{UP}", o.upstream.Addr())
	src = strings.ReplaceAll(src, "{PORT}", fmt.Sprint(o.port))
	src = "{\n\tadmin off\n\tpersist_config off\n\tauto_https off\n\tstorage file_system " + storage(t) +
		"\n\tlog {\n\t\tlevel ERROR\n\t}\n}\n" + src
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
	if err != nil {
		t.Fatalf("adapting Caddyfile: %v\n%s", err, src)
	}
	g := &Gateway{t: t, URL: fmt.Sprintf("http://127.0.0.1:%d", o.port), Upstream: o.upstream}
	g.load(cfg)
	return g
}

func (g *Gateway) load(cfg []byte) {
	g.t.Helper()
	if err := caddy.Load(cfg, true); err != nil {
		g.t.Fatalf("caddy.Load: %v\nconfig: %s", err, cfg)
	}
	g.t.Cleanup(func() { _ = caddy.Stop() })
	tr := &http.Transport{
		DisableCompression: true,
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test certificate
	}
	g.Client = &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	g.t.Cleanup(tr.CloseIdleConnections)
}

// Result is a completed response.
type Result struct {
	*http.Response
	Body  string
	Echo  *Seen  // when the echo upstream answered
	Error string // the {"error"} of a gateway answer
}

// Client sends the requests of Do: it follows no redirect and leaves
// Accept-Encoding to the test. It opens a connection per request: a
// reload shuts the replaced server's idle keep-alive connections down, and
// a request sent on one as it closes fails with EOF (the race every
// HTTP/1.1 client has with a server closing an idle connection; closing
// the client's idle connections after a load does not close one whose
// response was read but not yet returned to the pool).
var Client = &http.Client{
	Transport:     &http.Transport{DisableCompression: true, DisableKeepAlives: true},
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Do sends a request with Client; hdr holds header pairs ("Name", "value",
// …).
func Do(t *testing.T, method, url string, hdr ...string) Result {
	t.Helper()
	return Send(t, Client, method, url, nil, hdr...)
}

// Send sends a request with client c and reads the whole response; hdr
// holds header pairs, a "Host" pair setting the request's host.
func Send(t *testing.T, c *http.Client, method, url string, body io.Reader, hdr ...string) Result {
	t.Helper()
	resp, b := reqtest.Do(t, c, reqtest.New(t, method, url, body, hdr...))
	res := Result{Response: resp, Body: string(b)}
	var e Seen
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

// Do sends a request with g.Client (url relative to g.URL unless absolute).
func (g *Gateway) Do(method, url string, body io.Reader, hdr ...string) Result {
	g.t.Helper()
	if !strings.HasPrefix(url, "http") {
		url = g.URL + url
	}
	return Send(g.t, g.Client, method, url, body, hdr...)
}

// Get is Do for a GET without body.
func (g *Gateway) Get(url string, hdr ...string) Result {
	g.t.Helper()
	return g.Do(http.MethodGet, url, nil, hdr...)
}

// WantStatus fails unless res has the status.
func WantStatus(t *testing.T, res Result, status int) {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d; headers %v; body %q", res.StatusCode, status, res.Header, res.Body)
	}
}

// WantGatewayError checks a gateway-made JSON error answer: the status, a
// JSON {"error"} body, and that the upstream did not answer.
func WantGatewayError(t *testing.T, res Result, status int) {
	t.Helper()
	WantStatus(t, res, status)
	if res.Error == "" || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("want a JSON {error} body, got %q (%s)", res.Body, res.Header.Get("Content-Type"))
	}
	if res.Echo != nil {
		t.Fatalf("request reached the upstream")
	}
}

// WantErrorBody fails unless the body is exactly {"error": msg} served as
// application/json.
func WantErrorBody(t *testing.T, res Result, msg string) {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal([]byte(res.Body), &e); err != nil || len(e) != 1 || e["error"] != msg {
		t.Fatalf("body %q, want {\"error\":%q}", res.Body, msg)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
}

// UpstreamHeader returns a header the echo upstream received.
func UpstreamHeader(t *testing.T, res Result, name string) string {
	t.Helper()
	if res.Echo == nil {
		t.Fatalf("no upstream answer: %d %s", res.StatusCode, res.Body)
	}
	return res.Echo.Header.Get(name)
}

// FreePort returns a TCP port free on 127.0.0.1 a moment ago.
func FreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
