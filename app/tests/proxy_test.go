// Package tests holds the gateway's integration tests: a real gateway in
// process (Caddy with the gateway app, SQLite store) proxying to real
// upstream servers on 127.0.0.1.
package tests

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// echoGateway starts a gateway with a service "s" in front of an echo
// upstream "up", what most proxy tests start from, and returns the service
// id.
func echoGateway(t *testing.T) (*testgw.Gateway, int64) {
	t.Helper()
	g := testgw.Start(t, nil)
	return g, g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
}

func TestProxyFollowsRouteChanges(t *testing.T) {
	g := testgw.Start(t, nil)
	up1, up2 := testgw.Echo(t, "one"), testgw.Echo(t, "two")
	s1 := g.Service("one", testgw.Addr(up1))
	s2 := g.Service("two", testgw.Addr(up2))

	st, body, _ := g.Get("api.example.com", "/x")
	if st != 404 || !strings.Contains(body, "no route matched") {
		t.Fatalf("unmatched: %d %s", st, body)
	}
	rid := g.Route("r", s1, map[string]any{"hosts": []string{"api.example.com"}})
	st, body, _ = g.Get("api.example.com", "/x?q=1")
	if st != 200 {
		t.Fatalf("status %d: %s", st, body)
	}
	e := testgw.DecodeEcho(t, body)
	if e.Name != "one" || e.Path != "/x" || e.Query != "q=1" {
		t.Fatalf("got %+v", e)
	}
	// preserve_host false: the target's host:port is sent as Host.
	if e.Host != testgw.Addr(up1) {
		t.Fatalf("Host = %q, want %q", e.Host, testgw.Addr(up1))
	}
	if got := e.Headers["X-Forwarded-Host"]; len(got) == 0 || got[0] != "api.example.com" {
		t.Fatalf("X-Forwarded-Host = %v", got)
	}

	// Full replacement moves traffic immediately after the answer.
	g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", rid), map[string]any{
		"name": "r", "service_id": s2, "hosts": []string{"api.example.com"}, "paths": []string{"/v1"},
		"strip_path": true, "preserve_host": true,
	})
	st, body, _ = g.Get("api.example.com", "/v1/items")
	e = testgw.DecodeEcho(t, body)
	if st != 200 || e.Name != "two" || e.Path != "/items" || e.Host != "api.example.com" {
		t.Fatalf("after PUT: %d %+v", st, e)
	}
	st, _, _ = g.Get("api.example.com", "/x")
	if st != 404 {
		t.Fatalf("path outside the route: %d", st)
	}
	g.Must("DELETE", fmt.Sprintf("/api/v1/routes/%d", rid), nil)
	if st, _, _ = g.Get("api.example.com", "/v1/items"); st != 404 {
		t.Fatalf("after delete: %d", st)
	}
}

// A route's IPv6 host, given bare or in brackets, is the host of a request
// to [::1]:port.
func TestRouteIPv6Host(t *testing.T) {
	g, svc := echoGateway(t)
	for i, host := range []string{"::1", "[2001:db8::7]"} {
		g.Route(fmt.Sprint("v6-", i), svc, map[string]any{"hosts": []string{host}, "paths": []string{fmt.Sprint("/v6-", i)}})
	}
	for i, host := range []string{"[::1]:8080", "[2001:db8::7]"} {
		if st, body, _ := g.Get(host, fmt.Sprint("/v6-", i)); st != 200 {
			t.Fatalf("Host %s: %d %s", host, st, body)
		}
	}
	if st, _, _ := g.Get("[::2]", "/v6-0"); st != 404 {
		t.Fatalf("another IPv6 host: %d", st)
	}
}

// With trusted_proxies, the client IP and the X-Forwarded-For chain come
// from a trusted peer's header, for the gateway and for Caddy's own
// {client_ip} and reverse_proxy alike; from an untrusted peer they do not.
// X_Forwarded_For never reaches the upstream.
func TestTrustedProxiesDecideTheClient(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("r", sid, nil)
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-transform", "scope": "route", "route_id": rid,
		"config": map[string]any{"set_headers": map[string]string{"X-Client": "{http.vars.client_ip}"}}})
	send := func() testgw.Echoed {
		req, _ := http.NewRequest("GET", g.ProxyURL+"/", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		req.Header["X_Forwarded_For"] = []string{"198.51.100.9"} // read as X-Forwarded-For by CGI-style upstreams
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return testgw.DecodeEcho(t, string(b))
	}
	e := send()
	if e.Headers["X-Client"][0] != "127.0.0.1" || e.Headers["X-Forwarded-For"][0] != "127.0.0.1" {
		t.Fatalf("untrusted peer: X-Client %v, X-Forwarded-For %v", e.Headers["X-Client"], e.Headers["X-Forwarded-For"])
	}
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "trusted_proxies": []string{"127.0.0.1"}})
	e = send()
	if e.Headers["X-Client"][0] != "203.0.113.7" || e.Headers["X-Forwarded-For"][0] != "203.0.113.7, 127.0.0.1" {
		t.Fatalf("trusted peer: X-Client %v, X-Forwarded-For %v", e.Headers["X-Client"], e.Headers["X-Forwarded-For"])
	}
	// A '_' spelling is a client's, through a trusted proxy or not.
	if v := e.Headers["X_forwarded_for"]; v != nil {
		t.Fatalf("trusted peer: X_Forwarded_For %v reached the upstream", v)
	}
}
