package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/tcptest"
	"github.com/caddy-gateway/gateway/modules/router"
)

// Trust-boundary policies checked through the real gateway: what a plugin
// config or a proxied request must never be able to do.

// caddyConfig reads a path of the running Caddy config from Caddy's own
// admin endpoint.
func caddyConfig(t *testing.T, g *testgw.Gateway, path string, out any) {
	t.Helper()
	b := testgw.CaddyConfig(t, g.CaddyAdmin, "/config/"+path)
	if err := json.Unmarshal([]byte(b), out); err != nil {
		t.Fatalf("GET /config/%s: %q: %v", path, b, err)
	}
}

// TestTrustACMENeverTouchesTrustStore: every compiled config tells Caddy's
// pki app not to install its local root (the base config's own CAs too),
// and ACME names are public DNS names (an IP would need Caddy's internal
// CA).
func TestTrustACMENeverTouchesTrustStore(t *testing.T) {
	// (No CA with trust installation in the base config here: Caddy's
	// first, hand-written load would install it on this machine.)
	g := testgw.Start(t, nil)
	g.Service("s") // any mutation compiles and loads a config
	var pki struct {
		CAs map[string]struct {
			InstallTrust *bool `json:"install_trust"`
		} `json:"certificate_authorities"`
	}
	caddyConfig(t, g, "apps/pki", &pki)
	if ca, ok := pki.CAs["local"]; !ok || ca.InstallTrust == nil || *ca.InstallTrust {
		t.Errorf("pki CAs %+v: want local with install_trust false", pki.CAs)
	}
	for _, bad := range []string{"127.0.0.1", "::1", "localhost"} {
		g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"a.example.com", bad}}, "domains[1]")
	}
}

// TestTrustCORSCredentialsNeedOrigins: allow_origins * with
// allow_credentials is refused (it would echo any origin, null included,
// with credentials), as in APISIX.
func TestTrustCORSCredentialsNeedOrigins(t *testing.T) {
	g := testgw.Start(t, nil)
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "cors", "scope": "global",
		"config": map[string]any{"allow_credentials": true}}, "config.allow_credentials")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "cors", "scope": "global",
		"config": map[string]any{"allow_origins": []string{"https://a.example", "*"}, "allow_credentials": true}}, "config.allow_credentials")
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "cors", "scope": "global",
		"config": map[string]any{"allow_origins": []string{"https://*.example.com"}, "allow_credentials": true}})
}

// publicAndPrivate starts a gateway with a uriUpstream service and its
// routes public (/public) and private (privatePath, behind key-auth), for
// the tests of paths that climb from one into the other; sid is the
// service.
func publicAndPrivate(t *testing.T, privatePath string) (g *testgw.Gateway, sid int64) {
	t.Helper()
	g = testgw.Start(t, nil)
	sid = g.Service("s", uriUpstream(t))
	g.Route("public", sid, testgw.Paths("/public"))
	addPlugin(t, g, "key-auth", "route", g.Route("private", sid, testgw.Paths(privatePath)), nil)
	return g, sid
}

// uriUpstream answers with the request target it received, as sent on the
// wire.
func uriUpstream(t *testing.T) string {
	return tellingUpstream(t, func(r *http.Request) string { return r.RequestURI })
}

// tellingUpstream answers every request with what tell reads from it; its
// address.
func tellingUpstream(t *testing.T, tell func(*http.Request) string) string {
	s := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, tell(r))
	})
	return strings.TrimPrefix(s.URL, "http://")
}

// TestTrustDotSegments: a request's dot segments are removed and its runs
// of slashes merged before matching, in every encoding, so
// /public/../private and //private are /private (and
// needs its key); the upstream gets the normalized path; strip_path never
// sends a dot segment upstream; the dry run shows the same path.
func TestTrustDotSegments(t *testing.T) {
	g, sid := publicAndPrivate(t, "/private")
	g.Route("api", sid, map[string]any{"paths": []string{"/api"}, "strip_path": true})

	for _, p := range []string{
		"/public/../private/secret",
		"/public/%2e%2e/private/secret",
		"/public/%2E%2E/private/secret",
		"/public/..%2Fprivate/secret",
		"/public%2F..%2Fprivate/secret",
		"/public/./.%2e/private/secret",
		"/../private/secret",
		// runs of slashes are merged, as a merging upstream reads them
		"//private/secret",
		"/%2Fprivate/secret",
		"/public/..//private//secret",
	} {
		wantGatewayError(t, send(t, g, "GET", p, nil), 401, "")
	}
	if p := send(t, g, "GET", "/public//b///c", nil); p.Status != 200 || p.Body != "/public/b/c" {
		t.Fatalf("merged slashes forward: %d %q", p.Status, p.Body)
	}
	// Forwarded normalized, the query kept.
	if p := send(t, g, "GET", "/public/a/../b/./c?x=1", nil); p.Status != 200 || p.Body != "/public/b/c?x=1" {
		t.Fatalf("normalized forward: %d %q", p.Status, p.Body)
	}
	// Unchanged paths keep their encoding (an encoded slash inside a
	// segment reaches the upstream as sent).
	if p := send(t, g, "GET", "/public/a%2Fb", nil); p.Status != 200 || p.Body != "/public/a%2Fb" {
		t.Fatalf("encoded slash: %d %q", p.Status, p.Body)
	}
	// strip_path: nothing climbs above the upstream's root.
	for path, want := range map[string]string{
		"/api/../../etc":   "", // normalizes to /etc: no route (404)
		"/api/x/../../etc": "",
		"/api/x/../y":      "/y",
		"/api..":           "/",
		"/api../etc":       "/etc",
		"/api/%2e%2e/x":    "", // /x: no route
	} {
		p := send(t, g, "GET", path, nil)
		if want == "" {
			if p.Status != 404 {
				t.Errorf("%s: %d %q, want 404", path, p.Status, p.Body)
			}
			continue
		}
		if p.Status != 200 || p.Body != want {
			t.Errorf("%s: %d %q, want upstream path %q", path, p.Status, p.Body, want)
		}
	}
	// Paths that cannot be forwarded safely.
	for _, path := range []string{"/public/a%0d%0aX-Evil:%201", "/public/%00", "/public%5C..%5Cprivate"} {
		wantGatewayError(t, send(t, g, "GET", path, nil), 400, "")
	}
	// The dry run uses the same normalization.
	res := g.Must("GET", "/api/v1/router/test?path="+url.QueryEscape("/public/%2e%2e/private/secret"), nil)
	if res["path"] != "/private/secret" || res["route_name"] != "private" {
		t.Fatalf("router test: %v", res)
	}
	res = g.Must("GET", "/api/v1/router/test?path="+url.QueryEscape("/api../etc"), nil)
	if res["upstream_path"] != "/etc" || res["route_name"] != "api" {
		t.Fatalf("router test strip_path: %v", res)
	}
	g.WantError(400, "GET", "/api/v1/router/test?path="+url.QueryEscape("/a%0d%0a"), nil, "path")
}

// healthOf reads /api/v1/health's entry for the target at addr.
func healthOf(t *testing.T, g *testgw.Gateway, addr string) map[string]any {
	t.Helper()
	var list []map[string]any
	if st := g.JSON("GET", "/api/v1/health", nil, &list); st != 200 {
		t.Fatalf("health: %d", st)
	}
	for _, h := range list {
		if h["host"].(string)+":"+strconvItoa(h["port"]) == addr {
			return h
		}
	}
	t.Fatalf("no health entry for %s in %v", addr, list)
	return nil
}

func strconvItoa(v any) string { f, _ := v.(float64); return itoa(int64(f)) }

// TestTrustClientCannotTakeTargetDown: a client whose request makes the
// gateway build an invalid upstream request (a placeholder expanding its
// %0d%0a into a header value) gets 400, and the target never counts a
// failure: the service keeps answering. A target that really fails
// proxied requests is reported unhealthy by /api/v1/health as long as
// passive health keeps it out of rotation.
func TestTrustClientCannotTakeTargetDown(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Echo(t, "up")
	sid := g.Service("s", testgw.Addr(up))
	rid := g.Route("x", sid, testgw.Paths("/x"))
	g.Route("y", sid, testgw.Paths("/y"))
	addPlugin(t, g, "request-transform", "route", rid, map[string]any{"set_headers": map[string]string{
		"X-P": "{http.request.uri.path}", "X-Q": "{http.request.uri.query.q}",
	}})
	for i := 0; i < 5; i++ {
		wantGatewayError(t, send(t, g, "GET", "/x/a%0d%0aX-Evil:%201", nil), 400, "")
		wantGatewayError(t, send(t, g, "GET", "/x/a?q=%0d%0aX-Evil:%201", nil), 400, "")
	}
	for _, p := range []string{"/x/ok?q=1", "/y"} {
		if r := send(t, g, "GET", p, nil); r.Status != 200 {
			t.Fatalf("%s after the refused requests: %d %s", p, r.Status, r.Body)
		}
	}
	if h := healthOf(t, g, testgw.Addr(up)); h["state"] == "unhealthy" {
		t.Fatalf("health: %v", h)
	}

	// A target that accepts connections (the tcp check passes) but breaks
	// every proxied request: passive health takes it out, and the health
	// endpoint says so.
	badAddr := tcptest.Serve(t, func(c net.Conn) { c.Close() })
	bad := g.Service("bad", badAddr)
	g.Route("bad", bad, testgw.Paths("/bad"))
	for i := 0; i < 2; i++ {
		if r := send(t, g, "GET", "/bad", nil); r.Status < 500 {
			t.Fatalf("broken target: %d", r.Status)
		}
	}
	h := healthOf(t, g, badAddr)
	if h["state"] != "unhealthy" || !strings.Contains(fmt.Sprint(h["last_error"]), "passive") {
		t.Fatalf("health of a target passive health took out: %v", h)
	}
}

// TestTrustPlaceholdersOnlyFromTheRequest: plugin values may use the
// request's placeholders, never files, the environment or the host.
func TestTrustPlaceholdersOnlyFromTheRequest(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("r", sid, testgw.Paths("/r"))
	tid := g.Route("t", sid, testgw.Paths("/t"))
	plugin := func(typ string, route int64, cfg map[string]any) map[string]any {
		return map[string]any{"type": typ, "scope": "route", "route_id": route, "config": cfg}
	}
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{plugin("request-termination", tid, map[string]any{"body": "{file./etc/passwd}"}), "config.body"},
		{plugin("request-termination", tid, map[string]any{"body": "{system.hostname}"}), "config.body"},
		{plugin("request-transform", rid, map[string]any{"set_headers": map[string]string{"X-E": "{env.HOME}"}}), "config.set_headers.X-E"},
		{plugin("request-transform", rid, map[string]any{"set_query": map[string]string{"q": "{env.PATH}"}}), "config.set_query.q"},
		{plugin("response-transform", rid, map[string]any{"add_headers": map[string]string{"X-F": "a{file./etc/hostname}"}}), "config.add_headers.X-F"},
	} {
		g.WantError(400, "POST", "/api/v1/plugins", tc.body, tc.field, "not allowed")
	}
	g.Must("POST", "/api/v1/plugins", plugin("request-termination", tid, map[string]any{
		"status": 200, "body": `{"path":"{http.request.uri.path}","literal":"\{env.HOME\}"}`}))
	g.Must("POST", "/api/v1/plugins", plugin("response-transform", rid, map[string]any{
		"set_headers": map[string]string{"X-Client": "{http.vars.client_ip}", "X-M": "{http.request.method}"}}))
	p := send(t, g, "GET", "/t/x", nil)
	if p.Status != 200 || p.Body != `{"path":"/t/x","literal":"{env.HOME}"}` {
		t.Fatalf("termination body: %d %s", p.Status, p.Body)
	}
	p = send(t, g, "GET", "/r", nil)
	if p.Status != 200 || p.Header.Get("X-Client") != "127.0.0.1" || p.Header.Get("X-M") != "GET" {
		t.Fatalf("response-transform: %d %v", p.Status, p.Header)
	}
}

// TestTrustNoLoopThroughTheGateway: a target or an http-log collector
// that is the gateway's own proxy listener is refused (400 when named, a
// 502 at once when it becomes one): each request went round again with
// one more pair of connections held, some 250 times, until its forwarded
// headers outgrew the header limit (500 descriptors and 800 goroutines for
// a second, per client request).
func TestTrustNoLoopThroughTheGateway(t *testing.T) {
	g, sid := echoGateway(t)
	host, port, _ := net.SplitHostPort(g.ProxyAddr)
	g.WantError(400, "POST", "/api/v1/services/"+itoa(sid)+"/targets", map[string]any{"host": host, "port": atoiT(t, port)}, "port", "proxy listener")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "global",
		"config": map[string]any{"endpoint": "http://localhost:" + port + "/logs"}}, "config.endpoint")

	// A target on a free port, which the proxy then moves to.
	next := testgw.FreeAddr(t)
	self := g.Service("self", next)
	g.Route("loop", self, testgw.Paths("/loop"))
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": next})
	before := runtime.NumGoroutine()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + next + "/loop")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Fatalf("a route whose target is the proxy itself: %d, want 502", resp.StatusCode)
	}
	if n := runtime.NumGoroutine(); n > before+50 {
		t.Fatalf("%d goroutines after one request through the loop, %d before", n, before)
	}
}

// TestTrustOutboundNeverReachesAdmin: http-log endpoints, targets and the
// upstream probe cannot name the gateway admin API or Caddy's admin
// endpoint (400), and a collector that redirects there (or a name that
// resolves there) gets its dial refused: Caddy's admin never receives the
// POST /stop, and the gateway keeps running.
func TestTrustOutboundNeverReachesAdmin(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("r", sid, testgw.Paths("/r"))
	adminAddr := strings.TrimPrefix(g.AdminURL, "http://")
	_, caddyPort, _ := net.SplitHostPort(g.CaddyAdmin)
	for _, ep := range []string{
		"http://" + g.CaddyAdmin + "/stop",
		"http://" + adminAddr + "/api/v1/services",
		"http://localhost:" + caddyPort + "/stop",
		"http://0.0.0.0:" + caddyPort + "/stop",
	} {
		g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "global",
			"config": map[string]any{"endpoint": ep}}, "config.endpoint")
	}
	host, port, _ := net.SplitHostPort(g.CaddyAdmin)
	g.WantError(400, "POST", "/api/v1/services/"+itoa(sid)+"/targets", map[string]any{"host": host, "port": atoiT(t, port)}, "port")
	g.WantError(400, "POST", "/api/v1/applications/test-upstream", map[string]any{"upstream_url": "http://" + g.CaddyAdmin}, "upstream_url")

	// A collector that redirects to Caddy's admin /stop (307 keeps the
	// POST), and, where the machine's hostname resolves to the loopback,
	// that name: neither is delivered.
	var redirected atomic.Int32
	collector := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		http.Redirect(w, r, "http://"+g.CaddyAdmin+"/stop", http.StatusTemporaryRedirect)
	})
	addPlugin(t, g, "http-log", "route", rid, map[string]any{"endpoint": collector.URL + "/logs", "flush_interval_ms": 50})
	if hn, err := os.Hostname(); err == nil {
		if ips, _ := net.LookupHost(hn); len(ips) > 0 && net.ParseIP(ips[0]).IsLoopback() {
			rid2 := g.Route("r2", sid, testgw.Paths("/r2"))
			addPlugin(t, g, "http-log", "route", rid2, map[string]any{"endpoint": "http://" + net.JoinHostPort(hn, caddyPort) + "/stop", "flush_interval_ms": 50})
			if p := send(t, g, "GET", "/r2", nil); p.Status != 200 {
				t.Fatalf("proxied: %d", p.Status)
			}
			// A target named by that hostname: the proxy's dial is refused
			// (502), Caddy's admin never gets the POST /stop.
			adm := g.Service("adm", net.JoinHostPort(hn, caddyPort))
			g.Route("stop", adm, testgw.Paths("/stop"))
			if p := send(t, g, "POST", "/stop", nil); p.Status != 502 {
				t.Fatalf("proxied to Caddy's admin through a name: %d %s", p.Status, p.Body)
			}
		}
	}
	if p := send(t, g, "GET", "/r", nil); p.Status != 200 {
		t.Fatalf("proxied: %d", p.Status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for redirected.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if redirected.Load() == 0 {
		t.Fatal("the collector was never called")
	}
	time.Sleep(500 * time.Millisecond) // the redirect's dial, had it gone through
	var cfg map[string]any
	caddyConfig(t, g, "", &cfg) // Caddy's admin endpoint still answers
	if p := send(t, g, "GET", "/r", nil); p.Status != 200 {
		t.Fatalf("the gateway stopped proxying: %d", p.Status)
	}
}

func atoiT(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTrustPluginSecretsRedacted: http-log endpoint credentials and header
// values are secrets: viewers and the default export see <redacted>, the
// redacted value is never accepted back (400), and importing a redacted
// export skips the plugin with a reason.
func TestTrustPluginSecretsRedacted(t *testing.T) {
	g := testgw.Start(t, nil)
	cfg := map[string]any{"endpoint": "http://logger:pa55word@127.0.0.1:9/in", "headers": map[string]string{"Authorization": "Bearer s3cr3t-token"}}
	pid := testgw.ID(g.Must("POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "global", "config": cfg}))
	secrets := []string{"pa55word", "s3cr3t-token", "logger"}
	leaks := func(what string, body []byte) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(string(body), s) {
				t.Errorf("%s shows %q: %s", what, s, body)
			}
		}
	}
	// Editors and admins see the values they may change.
	if got := g.Must("GET", "/api/v1/plugins/"+itoa(pid), nil); !strings.Contains(fmt.Sprint(got["config"]), "pa55word") {
		t.Fatalf("admin view: %v", got)
	}

	tok := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	g.Header.Set("Authorization", "Bearer "+tok)
	_, export := g.Do("GET", "/api/v1/export", nil)
	leaks("the default export", export)
	if !strings.Contains(string(export), `http://\u003credacted\u003e@127.0.0.1:9/in`) && !strings.Contains(string(export), `http://<redacted>@127.0.0.1:9/in`) {
		t.Errorf("export: endpoint not redacted as expected: %s", export)
	}
	_, full := g.Do("GET", "/api/v1/export?include_secrets=true", nil)
	if !strings.Contains(string(full), "pa55word") || !strings.Contains(string(full), "s3cr3t-token") {
		t.Errorf("secret export lacks the plugin secrets: %s", full)
	}

	// Sent back, the redacted value is refused.
	var one map[string]any
	var doc map[string]any
	_ = json.Unmarshal(export, &doc)
	for _, p := range doc["plugins"].([]any) {
		one = p.(map[string]any)
	}
	g.WantError(400, "PUT", "/api/v1/plugins/"+itoa(pid), map[string]any{"type": "http-log", "scope": "global", "config": one["config"]}, "config.endpoint", "redact")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "global",
		"config": map[string]any{"endpoint": "http://127.0.0.1:9/in", "headers": map[string]string{"Authorization": "<redacted>"}}}, "config.headers.Authorization")

	// Importing the redacted export skips the plugin, with a reason.
	var report struct {
		Skipped []struct{ Kind, Ref, Reason string } `json:"skipped"`
	}
	if st := g.JSON("POST", "/api/v1/import", json.RawMessage(export), &report); st != 200 {
		t.Fatalf("import: %d", st)
	}
	if len(report.Skipped) != 1 || report.Skipped[0].Kind != "plugin" || !strings.Contains(report.Skipped[0].Reason, "redacted") {
		t.Fatalf("import report: %+v", report)
	}

	// Viewers see the plugins redacted.
	if st := g.JSON("POST", "/api/v1/import", json.RawMessage(full), nil); st != 200 {
		t.Fatalf("import with secrets: %d", st)
	}
	g.Must("POST", "/api/v1/users", map[string]any{"email": "viewer@example.com", "role": "viewer", "password": "viewer-pass"})
	viewer := g.Login("viewer@example.com", "viewer-pass")
	g.Header.Del("Authorization")
	g.Header.Set("Cookie", viewer.Get("Cookie"))
	st, list := g.Do("GET", "/api/v1/plugins", nil)
	if st != 200 || !strings.Contains(string(list), "redacted") {
		t.Fatalf("viewer list: %d %s", st, list)
	}
	leaks("the viewer's plugin list", list)
	var plugins []map[string]any
	_ = json.Unmarshal(list, &plugins)
	st, item := g.Do("GET", "/api/v1/plugins/"+strconvItoa(plugins[0]["id"]), nil)
	if st != 200 {
		t.Fatalf("viewer get: %d", st)
	}
	leaks("the viewer's plugin", item)
}

// hostUpstream answers with the Host it received.
func hostUpstream(t *testing.T) string {
	return tellingUpstream(t, func(r *http.Request) string { return r.Host })
}

// TestTrustHostWithExtraColons: a Host with more than one colon
// (secure.example.com:1:2), which nginx and Express read as the host before
// the first colon, is matched as that host: it does not pass by the host's
// route (and its key-auth) to a host-less route whose upstream would serve
// it as that host (preserve_host).
func TestTrustHostWithExtraColons(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s", hostUpstream(t))
	secure := g.Route("secure", sid, map[string]any{"hosts": []string{"secure.example.com"}, "preserve_host": true})
	wild := g.Route("wild", sid, map[string]any{"hosts": []string{"*.corp.example.com"}, "preserve_host": true})
	g.Route("any", sid, map[string]any{"preserve_host": true})
	addPlugin(t, g, "key-auth", "route", secure, nil)
	addPlugin(t, g, "key-auth", "route", wild, nil)
	for _, host := range []string{"secure.example.com:1:2", "SECURE.example.com:80:", "a.corp.example.com:1:x"} {
		wantGatewayError(t, send(t, g, "GET", "/", nil, "Host", host), 401, "")
	}
	if p := send(t, g, "GET", "/", nil, "Host", "other.example.com:1:2"); p.Status != 200 || p.Body != "other.example.com:1:2" {
		t.Fatalf("other host: %d %q", p.Status, p.Body)
	}
	res := g.Must("GET", "/api/v1/router/test?path=/&host="+url.QueryEscape("secure.example.com:1:2"), nil)
	if res["route_name"] != "secure" {
		t.Fatalf("router test: %v", res)
	}
}

// TestTrustPathParameters: a path whose ";parameters" make Tomcat, Jetty
// and Spring (which cut them from each segment before resolving dot
// segments) serve another route's path is 400: /public/..;/private,
// /;/private and /private;x/secret (for a /private/ route) reached the
// catch-all route without private's key. Parameters that leave the route
// as it is are forwarded unchanged.
func TestTrustPathParameters(t *testing.T) {
	g, sid := publicAndPrivate(t, "/private/")
	g.Route("any", sid, nil)
	for _, p := range []string{
		"/public/..;/private/secret",
		"/public/..;x=1/private/secret",
		"/public/.;/..;/private/secret",
		"/;/private/secret",
		"/;x/private/secret",
		"/private;x/secret",
		"/public/..%3B/private/secret", // the router reads the decoded path
		"/public/..;/..;/etc/passwd",   // /etc/passwd: the catch-all route, not public
	} {
		wantGatewayError(t, send(t, g, "GET", p, nil), 400, "invalid request path: the path's ;parameters change the route it matches")
	}
	for _, p := range []string{"/private/secret;jsessionid=1", "/private/a;x/b"} {
		wantGatewayError(t, send(t, g, "GET", p, nil), 401, "")
	}
	for _, p := range []string{"/public;v=1/x", "/x;y/z", "/public/a;b=c"} {
		if r := send(t, g, "GET", p, nil); r.Status != 200 || r.Body != p {
			t.Errorf("%s: %d %q, want it forwarded unchanged", p, r.Status, r.Body)
		}
	}
	g.WantError(400, "GET", "/api/v1/router/test?path="+url.QueryEscape("/public/..;/private/x"), nil, "path", ";parameters")
}

// TestLongPathRefused: a path longer than router.MaxPathBytes is 414 from
// the proxy and 400 from the dry run, before any route's regular
// expression runs over it (matching costs time in proportion to the path,
// and Go's server takes request lines up to 1 MB); one of exactly that
// length is proxied.
func TestLongPathRefused(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s", uriUpstream(t))
	g.Route("regex", sid, testgw.Paths(`~/(.*)/(.*)/(.*)/files/(.*)\.(png|jpg)`))
	g.Route("any", sid, nil)
	fits := "/" + strings.Repeat("a/", router.MaxPathBytes/2-1) + "b"
	if r := send(t, g, "GET", fits, nil); r.Status != 200 || r.Body != fits {
		t.Fatalf("a path of %d bytes: %d", len(fits), r.Status)
	}
	long := fits + "c"
	tooLong := fmt.Sprintf("invalid request path: the path is longer than %d bytes", router.MaxPathBytes)
	wantGatewayError(t, send(t, g, "GET", long, nil), 414, tooLong)
	// Percent-encoding does not count: the router matches the decoded path.
	if r := send(t, g, "GET", strings.ReplaceAll(fits, "a", "%61"), nil); r.Status != 200 {
		t.Fatalf("a percent-encoded path of %d bytes decoded: %d", len(fits), r.Status)
	}
	wantGatewayError(t, send(t, g, "GET", strings.ReplaceAll(long, "a", "%61"), nil), 414, tooLong)
	g.WantError(400, "GET", "/api/v1/router/test?path="+url.QueryEscape(long), nil, "path", "longer than")
}

// TestProxyHeaderLimit: a proxy listener reads at most Caddy's default 16
// KiB of a request's header section (Go's server answers 431 past it), not
// Go's 1 MB: every byte a client sends there may be copied by records,
// placeholders and route matching. The gateway option max_header_bytes
// raises it.
func TestProxyHeaderLimit(t *testing.T) {
	for _, c := range []struct {
		option map[string]any
		size   int
		want   int
	}{
		{nil, 12 << 10, 200},
		{nil, 20 << 10, 431},
		{map[string]any{"max_header_bytes": 64 << 10}, 20 << 10, 200},
	} {
		g := testgw.Start(t, &testgw.Options{Gateway: c.option})
		g.Route("any", g.Service("s", uriUpstream(t)), nil)
		if r := send(t, g, "GET", "/x", nil, "X-Big", strings.Repeat("b", c.size)); r.Status != c.want {
			t.Errorf("%v: a %d-byte header: %d, want %d", c.option, c.size, r.Status, c.want)
		}
		if err := stopGateway(); err != nil {
			t.Fatal(err)
		}
	}
}

// A loop the gateway cannot see from its own addresses: a route whose
// target is a load balancer in front of the gateway, or another node of a
// cluster whose route sends the request back. Here a plain relay on
// 127.0.0.1 stands in for it. Each round adds one Via entry; past
// 16 of them the gateway answers 508 Loop Detected instead of proxying,
// so one client request holds a bounded number of connections.
func TestTrustLoopThroughARelayBounded(t *testing.T) {
	g, _ := echoGateway(t)
	var rounds atomic.Int64
	proxyURL, _ := url.Parse("http://" + g.ProxyAddr)
	relay := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		rounds.Add(1)
		// what a load balancer forwards: the request, its headers (Via
		// among them) and one more X-Forwarded-For entry
		out := r.Clone(r.Context())
		out.RequestURI, out.URL.Scheme, out.URL.Host = "", proxyURL.Scheme, proxyURL.Host
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})
	self := g.Service("lb", strings.TrimPrefix(relay.URL, "http://"))
	g.Route("loop", self, testgw.Paths("/loop"))
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Get("http://" + g.ProxyAddr + "/loop")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusLoopDetected || rounds.Load() > 16 {
		t.Fatalf("a loop through a relay: %d %s after %d rounds, want 508 after at most 16", resp.StatusCode, body, rounds.Load())
	}
	if !strings.Contains(string(body), "Via") {
		t.Fatalf("508 without saying why: %s", body)
	}
}

// TestTrustStripPathDryRunRefusesAsTheProxy: a path whose strip_path rest
// has a backslash-delimited dot segment that the whole path did not
// (/x.\y stripped of /x is /.\y) is refused by the proxy, and the dry run
// refuses it too instead of showing an upstream_path the proxy never
// sends; a path the stripping leaves forwardable agrees as well.
func TestTrustStripPathDryRunRefusesAsTheProxy(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s", uriUpstream(t))
	g.Route("x", sid, map[string]any{"paths": []string{"/x"}, "strip_path": true})

	wantGatewayError(t, send(t, g, "GET", `/x.%5Cy`, nil), 400,
		"invalid request path: the path has a dot segment delimited by a backslash")
	g.WantError(400, "GET", "/api/v1/router/test?path="+url.QueryEscape(`/x.%5Cy`), nil, "path", "backslash")

	if p := send(t, g, "GET", "/x.y", nil); p.Status != 200 || p.Body != "/.y" {
		t.Fatalf("/x.y: %d %q", p.Status, p.Body)
	}
	res := g.Must("GET", "/api/v1/router/test?path="+url.QueryEscape("/x.y"), nil)
	if res["upstream_path"] != "/.y" || res["route_name"] != "x" {
		t.Fatalf("router test: %v", res)
	}
}

// TestTrustMethodOverrideKeepsTheRoute: a POST to a public POST route
// saying X-HTTP-Method-Override: DELETE (or X-HTTP-Method,
// X-Method-Override; any case, in a list), which Express, Rack, Symfony
// and Laravel upstreams serve as a DELETE, is 400 when DELETE takes
// another route (here behind key-auth) or none; an override the matched
// route serves too is forwarded. The dry run agrees.
func TestTrustMethodOverrideKeepsTheRoute(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s", tellingUpstream(t, func(r *http.Request) string {
		return r.Method + " " + r.Header.Get("X-HTTP-Method-Override")
	}))
	g.Route("public", sid, map[string]any{"paths": []string{"/items"}, "methods": []string{"GET", "POST"}})
	addPlugin(t, g, "key-auth", "route", g.Route("admin", sid, map[string]any{"paths": []string{"/items"}, "methods": []string{"DELETE"}}), nil)
	g.Route("report", sid, map[string]any{"paths": []string{"/report"}, "methods": []string{"POST"}})

	const refused = "invalid request: " + "a method override header (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override) names a method that changes the route the request matches"
	for _, h := range [][]string{
		{"X-HTTP-Method-Override", "DELETE"},
		{"X-HTTP-Method-Override", "delete"},
		{"X-HTTP-Method", "DELETE"},
		{"X-Method-Override", " DELETE "},
		{"X-HTTP-Method-Override", "GET, DELETE"},
	} {
		wantGatewayError(t, send(t, g, "POST", "/items", nil, h...), 400, refused)
	}
	// no route for PUT at all
	wantGatewayError(t, send(t, g, "POST", "/report", nil, "X-HTTP-Method-Override", "PUT"), 400, refused)
	// the matched route serves the override too, or it names the method itself
	for _, h := range [][]string{{"X-HTTP-Method-Override", "GET"}, {"X-HTTP-Method-Override", "post"}, {"X-HTTP-Method-Override", ""}} {
		if p := send(t, g, "POST", "/items", nil, h...); p.Status != 200 || p.Body != "POST "+h[1] {
			t.Fatalf("%v: %d %q", h, p.Status, p.Body)
		}
	}
	wantGatewayError(t, send(t, g, "DELETE", "/items", nil), 401, "")

	g.WantError(400, "GET", "/api/v1/router/test?method=POST&path=/items&headers="+url.QueryEscape("X-HTTP-Method-Override:DELETE"), nil, "headers", "method override")
	res := g.Must("GET", "/api/v1/router/test?method=POST&path=/items&headers="+url.QueryEscape("X-HTTP-Method-Override:GET"), nil)
	if res["route_name"] != "public" {
		t.Fatalf("router test: %v", res)
	}
}
