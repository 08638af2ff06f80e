package traffic

// The shared test harness: an in-process Caddy (caddy.Load) serving one route
// [plugin handlers..., reverse_proxy → echo upstream] on 127.0.0.1, plus
// helpers for config checks. caddy.Load is process-global: tests here never
// run in parallel, and each loads its own config.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-gateway/gateway/modules/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

var storageDir string

func TestMain(m *testing.M) {
	var err error
	storageDir, err = os.MkdirTemp("", "traffic-test-")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = caddy.Stop()
	_ = os.RemoveAll(storageDir)
	os.Exit(code)
}

// seen is what the upstream received.
type seen struct {
	Method  string      `json:"method"`
	URI     string      `json:"uri"`
	Host    string      `json:"host"`
	Header  http.Header `json:"header"`
	Body    string      `json:"body"`
	BodyErr string      `json:"body_error"`
}

// gw is a running Caddy with one route in front of an upstream.
type gw struct {
	t        *testing.T
	URL      string // plain HTTP
	TLSURL   string // HTTPS (only with withTLS)
	Client   *http.Client
	upstream *httptest.Server

	mu   sync.Mutex
	reqs []seen
}

type gwOption func(*gwConfig)

type gwConfig struct {
	upstream http.Handler
	tls      bool
	server   string
}

// withServer adds keys to the servers' JSON objects, e.g.
// `"trusted_proxies":{…}`.
func withServer(keys string) gwOption { return func(c *gwConfig) { c.server = "," + keys } }

// withUpstream replaces the echo upstream; the request is still recorded.
func withUpstream(h http.HandlerFunc) gwOption { return func(c *gwConfig) { c.upstream = h } }

// withTLS adds an HTTPS server (self-signed certificate for 127.0.0.1 and
// localhost) with the same route.
func withTLS() gwOption { return func(c *gwConfig) { c.tls = true } }

// startGW loads a Caddy config whose route runs handlers (each the JSON of
// a handler object, e.g. `{"handler":"gateway_cors"}`) then reverse_proxy.
func startGW(t *testing.T, handlers []string, opts ...gwOption) *gw {
	t.Helper()
	var cfg gwConfig
	for _, o := range opts {
		o(&cfg)
	}
	g := &gw{t: t}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := g.record(r)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	})
	up := cfg.upstream
	if up == nil {
		up = echo
	} else {
		inner := up
		up = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := g.record(r)
			r.Body = io.NopCloser(strings.NewReader(s.Body))
			inner.ServeHTTP(w, r)
		})
	}
	g.upstream = httptest.NewServer(up)
	t.Cleanup(g.upstream.Close)

	route := fmt.Sprintf(`[{"handle":[%s{"handler":"reverse_proxy","upstreams":[{"dial":%q}]}]}]`,
		joinHandlers(handlers), g.upstream.Listener.Addr().String())
	port := freePort(t)
	g.URL = "http://127.0.0.1:" + port
	servers := fmt.Sprintf(`"plain":{"listen":["127.0.0.1:%s"],"automatic_https":{"disable":true},"routes":%s%s}`, port, route, cfg.server)
	apps := ""
	if cfg.tls {
		tlsPort := freePort(t)
		g.TLSURL = "https://127.0.0.1:" + tlsPort
		servers += fmt.Sprintf(`,"secure":{"listen":["127.0.0.1:%s"],"automatic_https":{"disable":true},"tls_connection_policies":[{}],"routes":%s%s}`, tlsPort, route, cfg.server)
		certPEM, keyPEM := selfSigned(t)
		apps = fmt.Sprintf(`,"tls":{"certificates":{"load_pem":[{"certificate":%q,"key":%q}]}}`, certPEM, keyPEM)
	}
	config := fmt.Sprintf(`{
		"admin":{"disabled":true},
		"logging":{"logs":{"default":{"writer":{"output":"discard"}}}},
		"storage":{"module":"file_system","root":%q},
		"apps":{"http":{"servers":{%s}}%s}}`, storageDir, servers, apps)
	if err := caddy.Load([]byte(config), true); err != nil {
		t.Fatalf("caddy.Load: %v\nconfig: %s", err, config)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	tr := &http.Transport{
		DisableCompression: true,
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test certificate
	}
	g.Client = &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(tr.CloseIdleConnections)
	return g
}

func joinHandlers(hs []string) string {
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(h)
		b.WriteString(",")
	}
	return b.String()
}

func (g *gw) record(r *http.Request) seen {
	s := seen{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone()}
	b, err := io.ReadAll(r.Body)
	s.Body = string(b)
	if err != nil {
		s.BodyErr = err.Error()
	}
	g.mu.Lock()
	g.reqs = append(g.reqs, s)
	g.mu.Unlock()
	return s
}

// upstreamSeen returns what the upstream received, in order.
func (g *gw) upstreamSeen() []seen {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]seen(nil), g.reqs...)
}

// last is the last request the upstream received (fails when none).
func (g *gw) last() seen {
	g.t.Helper()
	s := g.upstreamSeen()
	if len(s) == 0 {
		g.t.Fatal("upstream received no request")
	}
	return s[len(s)-1]
}

// result is a completed response.
type result struct {
	*http.Response
	Body string
}

// do sends a request (url relative to g.URL unless absolute) and reads the
// whole response.
func (g *gw) do(method, url string, body io.Reader, hdr ...string) result {
	g.t.Helper()
	if !strings.HasPrefix(url, "http") {
		url = g.URL + url
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		g.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return result{Response: resp, Body: string(b)}
}

func (g *gw) get(url string, hdr ...string) result {
	g.t.Helper()
	return g.do(http.MethodGet, url, nil, hdr...)
}

// wantStatus fails unless res has the status.
func wantStatus(t *testing.T, res result, status int) {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d; headers %v; body %q", res.StatusCode, status, res.Header, res.Body)
	}
}

// wantErrorBody fails unless the body is {"error": msg}.
func wantErrorBody(t *testing.T, res result, msg string) {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal([]byte(res.Body), &e); err != nil || len(e) != 1 || e["error"] != msg {
		t.Fatalf("body %q, want {\"error\":%q}", res.Body, msg)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func selfSigned(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
}

// ---- config checks ----

// normalized decodes raw into a fresh config of the plugin type (as the
// admin API does) and returns the marshaled result as a map.
func normalized(t *testing.T, typeName, raw string) (map[string]any, error) {
	t.Helper()
	out, err := plugins.NormalizeConfig(typeName, json.RawMessage(raw))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

// wantDefaults checks that the config raw normalizes to exactly want (JSON).
func wantDefaults(t *testing.T, typeName, raw, want string) {
	t.Helper()
	got, err := normalized(t, typeName, raw)
	if err != nil {
		t.Fatalf("%s %s: %v", typeName, raw, err)
	}
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON: %v", err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("%s %s normalized to\n %s\nwant\n %s", typeName, raw, gb, wb)
	}
}

// wantConfigErrors checks that each raw config (key) is refused with an
// error naming the field (value: the expected FieldError field, "config."
// prefixed as the admin API shows it).
func wantConfigErrors(t *testing.T, typeName string, cases map[string]string) {
	t.Helper()
	for raw, field := range cases {
		_, err := normalized(t, typeName, raw)
		if err == nil {
			t.Errorf("%s %s: no error, want one naming %s", typeName, raw, field)
			continue
		}
		fe, ok := err.(*schema.FieldError)
		if !ok || fe.Field != field {
			t.Errorf("%s %s: error %q, want one naming %s", typeName, raw, err, field)
		}
	}
}

// handlerJSON is the Caddy handler JSON of a plugin instance with the
// normalized config raw (what the gateway's compiler emits).
func handlerJSON(t *testing.T, typeName, raw string) string {
	t.Helper()
	cfg, err := plugins.NormalizeConfig(typeName, json.RawMessage(raw))
	if err != nil {
		t.Fatalf("%s %s: %v", typeName, raw, err)
	}
	out, err := plugins.HandlerJSON(typeName, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// adaptCaddyfile adapts a Caddyfile site body (the directives inside a site
// block) and returns the handler objects of the result in order.
func adaptCaddyfile(t *testing.T, body string) ([]map[string]any, error) {
	t.Helper()
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("http://127.0.0.1:0 {\n"+body+"\n}\n"), nil)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	var hs []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["handler"].(string); ok {
				hs = append(hs, v)
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return hs, nil
}

// wantCaddyfile adapts body and checks that its handler named handler equals
// want (JSON, with the "handler" key).
func wantCaddyfile(t *testing.T, body, want string) {
	t.Helper()
	hs, err := adaptCaddyfile(t, body)
	if err != nil {
		t.Fatalf("adapting %q: %v", body, err)
	}
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON: %v", err)
	}
	wb, _ := json.Marshal(w)
	for _, h := range hs {
		if h["handler"] == w["handler"] {
			gb, _ := json.Marshal(h)
			if !bytes.Equal(gb, wb) {
				t.Fatalf("Caddyfile %q gave\n %s\nwant\n %s", body, gb, wb)
			}
			return
		}
	}
	t.Fatalf("Caddyfile %q: no handler %v in %v", body, w["handler"], hs)
}

// testInfo is a handler standing in for the gateway router in tests: it
// attaches a gwctx.Info with the router's decisions.
type testInfo struct {
	HTTPSPort int    `json:"https_port,omitempty"`
	ClientIP  string `json:"client_ip,omitempty"`
}

func init() { caddy.RegisterModule(testInfo{}) }

func (testInfo) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.test_gwinfo", New: func() caddy.Module { return new(testInfo) }}
}

func (h testInfo) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info, r := gwctx.Ensure(r)
	info.HTTPSPort = h.HTTPSPort
	info.ClientIP = h.ClientIP
	return next.ServeHTTP(w, r)
}

// caddyLoadErr loads a config whose route has the handler JSON h and returns
// caddy.Load's error.
func caddyLoadErr(t *testing.T, h string) error {
	t.Helper()
	cfg := fmt.Sprintf(`{"admin":{"disabled":true},"logging":{"logs":{"default":{"writer":{"output":"discard"}}}},
		"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:%s"],"routes":[{"handle":[%s]}]}}}}}`, freePort(t), h)
	err := caddy.Load([]byte(cfg), true)
	if err == nil {
		_ = caddy.Stop()
	}
	return err
}
