package tests

import (
	"crypto/tls"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestPluginRequestIDThroughGateway: a generated UUIDv4 goes upstream and
// back; an incoming id is trusted; custom header names work.
func TestPluginRequestIDThroughGateway(t *testing.T) {
	g, sid := echoGateway(t)
	g.Route("all", sid, nil)
	addPlugin(t, g, "request-id", "global", 0, nil)

	p := send(t, g, "GET", "/x", nil)
	id := p.Header.Get("X-Request-ID")
	if p.Status != 200 || !uuidV4.MatchString(id) {
		t.Fatalf("generated id %q (status %d)", id, p.Status)
	}
	if e := testgw.DecodeEcho(t, p.Body); len(e.Headers["X-Request-Id"]) != 1 || e.Headers["X-Request-Id"][0] != id {
		t.Fatalf("upstream got %v, downstream %q", e.Headers["X-Request-Id"], id)
	}
	p = send(t, g, "GET", "/x", nil, "X-Request-ID", "abc-123")
	if got := p.Header.Get("X-Request-ID"); got != "abc-123" || testgw.DecodeEcho(t, p.Body).Headers["X-Request-Id"][0] != "abc-123" {
		t.Fatalf("trusted incoming id: %q", got)
	}
}

// TestPluginIPRestrictionThroughGateway: the client IP honours
// settings.trusted_proxies; deny wins over allow; status and message.
func TestPluginIPRestrictionThroughGateway(t *testing.T) {
	g, sid := echoGateway(t)
	g.Route("all", sid, nil)
	addPlugin(t, g, "ip-restriction", "global", 0, map[string]any{
		"allow": []string{"10.0.0.0/8"}, "deny": []string{"10.1.0.0/16"}, "status": 451, "message": "go away"})

	// The peer (127.0.0.1) is not trusted: X-Forwarded-For is ignored.
	wantGatewayError(t, send(t, g, "GET", "/", nil, "X-Forwarded-For", "10.0.0.5"), 451, "go away")

	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "trusted_proxies": []string{"127.0.0.1/32"}})
	if p := send(t, g, "GET", "/", nil, "X-Forwarded-For", "10.0.0.5"); p.Status != 200 {
		t.Fatalf("allowed client behind a trusted proxy: %d %s", p.Status, p.Body)
	}
	wantGatewayError(t, send(t, g, "GET", "/", nil, "X-Forwarded-For", "10.1.2.3"), 451, "go away")
	wantGatewayError(t, send(t, g, "GET", "/", nil, "X-Forwarded-For", "192.168.1.1"), 451, "go away")
	// The rightmost untrusted address decides, not a spoofed leftmost one.
	wantGatewayError(t, send(t, g, "GET", "/", nil, "X-Forwarded-For", "10.0.0.5, 192.168.1.1"), 451, "go away")
}

// TestPluginCORSThroughGateway: preflights are answered 204 without
// reaching the upstream; wildcard origins; actual responses decorated,
// the upstream's own CORS headers replaced (an upstream granting every
// origin grants nothing the plugin does not), Vary: Origin on every
// answer.
func TestPluginCORSThroughGateway(t *testing.T) {
	g := testgw.Start(t, nil)
	hits := 0
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits++
		if o := r.Header.Get("Origin"); o != "" {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok")
	})
	sid := g.Service("s", strings.TrimPrefix(up.URL, "http://"))
	g.Route("all", sid, nil)
	addPlugin(t, g, "cors", "global", 0, map[string]any{"allow_origins": []string{"*.example.com"}, "expose_headers": []string{"X-Total"}})

	p := send(t, g, "OPTIONS", "/api", nil, "Origin", "https://app.example.com",
		"Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "X-Custom")
	if p.Status != 204 || hits != 0 {
		t.Fatalf("preflight: %d, upstream hits %d", p.Status, hits)
	}
	if p.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(p.Header.Get("Access-Control-Allow-Methods"), "PUT") ||
		p.Header.Get("Access-Control-Allow-Headers") != "X-Custom" || p.Header.Get("Access-Control-Max-Age") != "600" {
		t.Fatalf("preflight headers: %v", p.Header)
	}
	p = send(t, g, "GET", "/api", nil, "Origin", "https://a.b.example.com")
	if p.Status != 200 || p.Header.Get("Access-Control-Allow-Origin") != "https://a.b.example.com" || p.Header.Get("Access-Control-Expose-Headers") != "X-Total" {
		t.Fatalf("actual request: %d %v", p.Status, p.Header)
	}
	for _, origin := range []string{"https://example.com", "https://evil.test", "null"} {
		p = send(t, g, "GET", "/api", nil, "Origin", origin)
		if p.Header.Values("Access-Control-Allow-Origin") != nil || p.Header.Values("Access-Control-Allow-Credentials") != nil {
			t.Fatalf("origin %s is not *.example.com: %v", origin, p.Header)
		}
	}
	p = send(t, g, "GET", "/api", nil)
	if p.Status != 200 || p.Header.Get("Vary") != "Origin" {
		t.Fatalf("without Origin: %d, Vary %q", p.Status, p.Header.Values("Vary"))
	}
}

// TestPluginRedirectThroughGateway: to_https goes to the HTTPS listener's
// port and passes HTTPS requests; location with keep_path.
func TestPluginRedirectThroughGateway(t *testing.T) {
	g, pool := startWithCert(t, "secure.test")
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	secure := g.Route("secure", sid, map[string]any{"hosts": []string{"secure.test"}})
	moved := g.Route("moved", sid, testgw.Paths("/old"))
	httpsAddr := enableHTTPS(t, g)
	addPlugin(t, g, "redirect", "route", secure, map[string]any{"to_https": true})
	addPlugin(t, g, "redirect", "route", moved, map[string]any{"location": "https://new.example.com/base", "status": 301})

	p := send(t, g, "GET", "/a/b?q=1", nil, "Host", "secure.test")
	_, port, _ := strings.Cut(httpsAddr, ":")
	if want := "https://secure.test:" + port + "/a/b?q=1"; p.Status != 308 || p.Header.Get("Location") != want {
		t.Fatalf("to_https: %d %q, want 308 %q", p.Status, p.Header.Get("Location"), want)
	}
	tc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "secure.test"}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", "https://"+httpsAddr+"/a", nil)
	req.Host = "secure.test"
	resp, err := tc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("to_https over HTTPS: %d", resp.StatusCode)
	}

	p = send(t, g, "GET", "/old/x?y=2", nil)
	if want := "https://new.example.com/base/old/x?y=2"; p.Status != 301 || p.Header.Get("Location") != want {
		t.Fatalf("location: %d %q, want %q", p.Status, p.Header.Get("Location"), want)
	}
}

// TestPluginRequestSizeLimitThroughGateway: 413 {error} for declared and for
// chunked bodies over the limit; bodies within pass.
func TestPluginRequestSizeLimitThroughGateway(t *testing.T) {
	g, sid := echoGateway(t)
	g.Route("all", sid, nil)
	addPlugin(t, g, "request-size-limit", "global", 0, map[string]any{"max_bytes": 10})

	if p := send(t, g, "POST", "/", strings.NewReader("0123456789")); p.Status != 200 || testgw.DecodeEcho(t, p.Body).Body != "0123456789" {
		t.Fatalf("within the limit: %d %s", p.Status, p.Body)
	}
	wantGatewayError(t, send(t, g, "POST", "/", strings.NewReader("0123456789A")), 413, "")
	// A chunked body (no Content-Length): an io.Reader that is not a known type.
	chunked := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }
	wantGatewayError(t, send(t, g, "POST", "/", chunked(strings.Repeat("x", 5000))), 413, "")
	if p := send(t, g, "POST", "/", chunked("short")); p.Status != 200 || testgw.DecodeEcho(t, p.Body).Body != "short" {
		t.Fatalf("chunked within the limit: %d %s", p.Status, p.Body)
	}
}

// TestPluginRequestTerminationThroughGateway: default {error} answer, and
// a raw body with its content type.
func TestPluginRequestTerminationThroughGateway(t *testing.T) {
	g, sid := echoGateway(t)
	a := g.Route("a", sid, testgw.Paths("/a"))
	b := g.Route("b", sid, testgw.Paths("/b"))
	addPlugin(t, g, "request-termination", "route", a, nil)
	addPlugin(t, g, "request-termination", "route", b, map[string]any{"status": 200, "body": "<h1>maintenance</h1>", "content_type": "text/html"})

	wantGatewayError(t, send(t, g, "GET", "/a", nil), 503, "service unavailable")
	p := send(t, g, "GET", "/b", nil)
	if p.Status != 200 || p.Body != "<h1>maintenance</h1>" || p.Header.Get("Content-Type") != "text/html" {
		t.Fatalf("raw body: %d %q %v", p.Status, p.Body, p.Header)
	}
	if cl := p.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(p.Body)) {
		t.Fatalf("Content-Length %s", cl)
	}
}

// TestPluginRequestTransformSetsUpstreamHost: a Host entry of
// request-transform is the Host the upstream gets, whether the route
// preserves the client's Host or not (the service proxy sets Host after the
// plugin chain).
func TestPluginRequestTransformSetsUpstreamHost(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Echo(t, "up")
	sid := g.Service("s", testgw.Addr(up))
	plain := g.Route("plain", sid, testgw.Paths("/plain"))
	kept := g.Route("kept", sid, map[string]any{"paths": []string{"/kept"}, "preserve_host": true})
	untouched := g.Route("untouched", sid, map[string]any{"paths": []string{"/untouched"}, "preserve_host": true})
	for _, r := range []int64{plain, kept} {
		addPlugin(t, g, "request-transform", "route", r, map[string]any{"set_headers": map[string]string{"Host": "custom.example"}})
	}
	addPlugin(t, g, "request-transform", "route", untouched, map[string]any{"set_headers": map[string]string{"X-A": "1"}})
	for _, path := range []string{"/plain", "/kept"} {
		if e := testgw.DecodeEcho(t, send(t, g, "GET", path, nil, "Host", "client.example").Body); e.Host != "custom.example" {
			t.Fatalf("%s: upstream Host %q, want custom.example", path, e.Host)
		}
	}
	if e := testgw.DecodeEcho(t, send(t, g, "GET", "/untouched", nil, "Host", "client.example").Body); e.Host != "client.example" || e.Headers["X-A"][0] != "1" {
		t.Fatalf("preserve_host without a Host entry: %q", e.Host)
	}
	if e := testgw.DecodeEcho(t, send(t, g, "GET", "/plain", nil).Body); e.Host != "custom.example" {
		t.Fatalf("second request: %q", e.Host)
	}
}
