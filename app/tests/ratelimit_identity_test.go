package tests

import (
	"fmt"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestRateLimitClientIdentity: behind a trusted proxy (the connection is
// 127.0.0.1, the client is in X-Forwarded-For), an IPv4 client and its
// IPv4-mapped IPv6 spelling are one client of the rate-limit plugin, and
// every address of one IPv6 /64 is one client (the failed-login limit's
// identity, package clientid); ipv6_prefix_length changes the prefix.
func TestRateLimitClientIdentity(t *testing.T) {
	g, sid := echoGateway(t)
	r64 := g.Route("by64", sid, testgw.Paths("/by64"))
	r128 := g.Route("by128", sid, testgw.Paths("/by128"))
	addPlugin(t, g, "rate-limit", "route", r64, map[string]any{"limit": 2, "window_s": 600})
	addPlugin(t, g, "rate-limit", "route", r128, map[string]any{"limit": 2, "window_s": 600, "ipv6_prefix_length": 128})
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "trusted_proxies": []string{"127.0.0.1/32"}})

	want := func(path, xff string, status int) {
		t.Helper()
		if p := send(t, g, "GET", path, nil, "X-Forwarded-For", xff); p.Status != status {
			t.Fatalf("GET %s from %s: %d, want %d", path, xff, p.Status, status)
		}
	}
	for _, path := range []string{"/by64", "/by128"} {
		// One IPv4 client, however it is spelt.
		want(path, "203.0.113.8", 200)
		want(path, "::ffff:203.0.113.8", 200)
		want(path, "203.0.113.8", 429)
		want(path, "::ffff:203.0.113.8", 429)
		want(path, "203.0.113.9", 200)
	}
	// One /64 is one client by default...
	want("/by64", "2001:db8:1:2::1", 200)
	want("/by64", "2001:db8:1:2:ffff::9", 200)
	for i := range 3 {
		want("/by64", fmt.Sprintf("2001:db8:1:2:%x::1", i+7), 429)
	}
	want("/by64", "2001:db8:1:3::1", 200)
	// ... and every address with a prefix length of 128.
	for i := range 3 {
		want("/by128", fmt.Sprintf("2001:db8:1:2::%x", i+1), 200)
	}
	want("/by128", "2001:db8:1:2::1", 200)
	want("/by128", "2001:db8:1:2::1", 429)

	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "route", "route_id": r64,
		"config": map[string]any{"limit": 1, "ipv6_prefix_length": 129}}, "config.ipv6_prefix_length")
}
