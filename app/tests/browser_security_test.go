package tests

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/reqtest"
)

// adminAs sends a request to the admin listener with header name, value
// pairs (a "Host" pair sets the request's Host) and answers the status and
// body.
func adminAs(t *testing.T, g *testgw.Gateway, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req := reqtest.New(t, method, g.AdminURL+path, strings.NewReader(body), hdr...)
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestDNSRebinding: a page of a name its owner points at 127.0.0.1 is
// same-origin with the admin listener in the browser's eyes (Origin and
// Host agree, Sec-Fetch-Site is same-origin), so only the Host tells it
// apart. In open mode it would mint the admin token and read it. The admin
// listener (bound to 127.0.0.1 here) answers only IP addresses, localhost
// and the host of settings.public_url.
func TestDNSRebinding(t *testing.T) {
	g := testgw.Start(t, nil)
	port := g.AdminURL[strings.LastIndex(g.AdminURL, ":")+1:]
	evil := "rebind.evil.example:" + port
	browser := []string{"Host", evil, "Origin", "http://" + evil, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}
	for _, req := range []struct{ method, path string }{
		{"POST", "/api/v1/admin/token"}, {"GET", "/api/v1/services"}, {"GET", "/"},
		{"GET", "/api/v1/admin/status"}, {"GET", "/metrics"}, {"POST", "/api/v1/auth/login"},
	} {
		st, b := adminAs(t, g, req.method, req.path, `{}`, browser...)
		wantError(t, st, b, 403, "Host")
	}
	// Nothing happened: the API is still open.
	if g.Must("GET", "/api/v1/admin/status", nil)["auth_enabled"] != false {
		t.Fatal("a rebound page changed the gateway")
	}
	// Names that cannot be rebound pass, with or without the port.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "[::1]", "127.0.0.2"} {
		if st, b := adminAs(t, g, "GET", "/api/v1/services", "", "Host", host); st != 200 {
			t.Fatalf("Host %s: %d %s", host, st, b)
		}
	}
	// The public URL's host is the name a proxy in front gives.
	settings := g.Must("GET", "/api/v1/settings", nil)
	delete(settings, "updated_at")
	settings["public_url"] = "https://admin.example.com/ui"
	g.Must("PUT", "/api/v1/settings", settings)
	for _, host := range []string{"admin.example.com", "Admin.Example.com:443", "admin.example.com:" + port} {
		if st, b := adminAs(t, g, "GET", "/api/v1/services", "", "Host", host); st != 200 {
			t.Fatalf("Host %s: %d %s", host, st, b)
		}
	}
	for _, host := range []string{"admin.example.com.evil.example", "evil-admin.example.com", evil} {
		st, b := adminAs(t, g, "POST", "/api/v1/services", `{"name":"x"}`, "Host", host)
		wantError(t, st, b, 403, "Host")
	}
}

// TestProxyDropsAdminCookies: cookies are not bound to a port, so a browser
// signed in to the dashboard sends its session cookie to the proxy on the
// same host too. The proxy must not hand it to upstreams: an editor can
// point a route at a server of their own, and the cookie works on the
// admin API as its user (an admin).
func TestProxyDropsAdminCookies(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Echo(t, "up")
	g.Route("r", g.Service("s", testgw.Addr(up)), testgw.Paths("/x"))
	g.Header.Set("Authorization", "Bearer "+g.Must("POST", "/api/v1/admin/token", nil)["token"].(string))
	g.Must("POST", "/api/v1/users", map[string]any{"email": "admin@example.com", "role": "admin", "password": "password-1"})
	session := g.Login("admin@example.com", "password-1").Get("Cookie")
	if !strings.HasPrefix(session, "gateway_session=") {
		t.Fatalf("login cookie: %q", session)
	}
	for _, c := range []struct {
		sent []string
		want []string
	}{
		{[]string{session}, nil},
		{[]string{"a=1; " + session + "; gateway_sso=xyz;b=2"}, []string{"a=1; b=2"}},
		{[]string{session, "c=3", "gateway_sso=xyz"}, []string{"c=3"}},
		{[]string{"gateway_sessions=1; my_gateway_session=2"}, []string{"gateway_sessions=1; my_gateway_session=2"}},
	} {
		var hdr []string
		for _, v := range c.sent {
			hdr = append(hdr, "Cookie", v)
		}
		a := g.Proxy(t, "GET", "/x", nil, hdr...)
		if a.Status != 200 {
			t.Fatalf("proxy: %d %s", a.Status, a.Body)
		}
		got := testgw.DecodeEcho(t, a.Body).Headers["Cookie"]
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("sent Cookie %q, upstream got %q, want %q", c.sent, got, c.want)
		}
	}
	// Nor can a plugin an editor configures read it: the removal comes
	// before the chain (a request-termination body echoing the Cookie
	// header).
	rid := g.Route("echo", g.Service("s2", testgw.Addr(up)), testgw.Paths("/echo"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-termination", "scope": "route", "route_id": rid,
		"config": map[string]any{"status": 200, "body": "cookie=[{http.request.header.Cookie}]", "content_type": "text/plain"}})
	if a := g.Proxy(t, "GET", "/echo", nil, "Cookie", "a=1; "+session); a.Body != "cookie=[a=1]" {
		t.Errorf("a plugin saw the cookie: %d %q", a.Status, a.Body)
	}
	// The cookie the upstream would have got is the admin's.
	st, b := adminAs(t, g, "GET", "/api/v1/auth/me", "", "Cookie", session)
	if st != 200 || !strings.Contains(string(b), `"role":"admin"`) {
		t.Fatalf("session: %d %s", st, b)
	}
}

// TestProxyDropsAdminSetCookies: the browser's cookie jar ignores ports,
// so a Set-Cookie for gateway_session from an upstream (or a plugin's
// header) at 127.0.0.1:8080 would replace the administrator's session for
// the dashboard at 127.0.0.1:9080: with the upstream owner's own session
// (fixation), an SSO binding (login CSRF), or nothing (sign-out). The
// proxy removes those lines, the nameless spelling included, and keeps
// every other cookie.
func TestProxyDropsAdminSetCookies(t *testing.T) {
	g := testgw.Start(t, nil)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		for _, c := range []string{
			"gateway_session=planted; Path=/; HttpOnly",
			"app=1; Path=/",
			"=gateway_session=nameless; Path=/",
			" gateway_sso=bound",
			"gateway_session=; Max-Age=0",
			"gateway_sessions=2",
		} {
			w.Header().Add("Set-Cookie", c)
		}
		if r.URL.Path == "/x/flush" {
			// the header goes out with a flush, before any body
			http.NewResponseController(w).Flush()
		}
		_, _ = io.WriteString(w, "ok")
	})
	svc := g.Service("s", testgw.Addr(up))
	g.Route("r", svc, testgw.Paths("/x"))
	rid := g.Route("plugin", svc, testgw.Paths("/p"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "response-transform", "scope": "route", "route_id": rid,
		"config": map[string]any{"set_headers": map[string]string{"Set-Cookie": "gateway_session=from-a-plugin"}}})
	for path, want := range map[string][]string{
		"/x":       {"app=1; Path=/", "gateway_sessions=2"},
		"/x/flush": {"app=1; Path=/", "gateway_sessions=2"},
		"/p":       nil,
	} {
		a := g.Proxy(t, "GET", path, nil)
		if a.Status != 200 || a.Body != "ok" {
			t.Fatalf("%s: %d %q", path, a.Status, a.Body)
		}
		if got := a.Header.Values("Set-Cookie"); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: the client got Set-Cookie %q, want %q", path, got, want)
		}
	}
}

// TestAdminAnswersNotSniffable: every answer of the admin listener says
// X-Content-Type-Options: nosniff (JSON carrying stored names, text/plain
// metrics and errors included), and /docs, like the dashboard, may not be
// framed by another site.
func TestAdminAnswersNotSniffable(t *testing.T) {
	g := testgw.Start(t, nil)
	g.Service("<img src=x onerror=alert(1)>")
	for _, req := range []struct{ method, path string }{
		{"GET", "/api/v1/services"}, {"GET", "/api/v1/nope/<b>"}, {"POST", "/api/v1/services"},
		{"GET", "/metrics"}, {"GET", "/healthz"}, {"GET", "/openapi.yaml"}, {"GET", "/openapi.json"},
		{"GET", "/docs"}, {"GET", "/"}, {"GET", "/dashboard/assets/app.js"}, {"GET", "/nope"},
	} {
		resp, err := g.Client.Do(reqtest.New(t, req.method, g.AdminURL+req.path, strings.NewReader("{"), "Content-Type", "text/plain"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d, %s): X-Content-Type-Options %q", req.method, req.path, resp.StatusCode, resp.Header.Get("Content-Type"), got)
		}
		if req.path == "/docs" {
			if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("/docs may be framed: %v", resp.Header)
			}
		}
	}
	// A refused Host is answered the same way.
	resp, err := g.Client.Do(reqtest.New(t, "GET", g.AdminURL+"/", nil, "Host", "evil.example"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("refused Host: %d %v", resp.StatusCode, resp.Header)
	}
}
