package traffic

import (
	"net/http"
	"testing"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestIPRestrictionTraffic(t *testing.T) {
	cases := []struct {
		config  string
		status  int
		message string
	}{
		{`{"allow":["127.0.0.1"]}`, 200, ""},
		{`{"allow":["127.0.0.0/8"],"deny":["10.0.0.0/8"]}`, 200, ""},
		{`{"allow":["10.0.0.0/8"]}`, 403, "forbidden"},
		{`{"deny":["127.0.0.0/24"]}`, 403, "forbidden"},
		{`{"allow":["127.0.0.1"],"deny":["127.0.0.1"],"status":451,"message":"nope"}`, 451, "nope"}, // deny wins
		{`{"deny":["::ffff:127.0.0.1"]}`, 403, "forbidden"},                                         // v4-mapped form
		{`{"deny":["::1"]}`, 200, ""},
	}
	for _, c := range cases {
		g := startGW(t, []string{plugintest.HandlerJSON(t, "ip-restriction", c.config)})
		res := g.Get("/x")
		plugintest.WantStatus(t, res, c.status)
		if c.status != 200 {
			plugintest.WantErrorBody(t, res, c.message)
			if n := len(g.Upstream.Requests()); n != 0 {
				t.Fatalf("%s: refused request reached the upstream", c.config)
			}
		}
	}
}

// The client address is Caddy's client_ip when the peer is a trusted proxy.
func TestIPRestrictionTrustedProxy(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "ip-restriction", `{"deny":["203.0.113.0/24"]}`)},
		plugintest.WithServer(map[string]any{
			"trusted_proxies":   map[string]any{"source": "static", "ranges": []string{"127.0.0.1/32"}},
			"client_ip_headers": []string{"X-Forwarded-For"},
		}))
	plugintest.WantStatus(t, g.Get("/", "X-Forwarded-For", "203.0.113.9"), http.StatusForbidden)
	plugintest.WantStatus(t, g.Get("/", "X-Forwarded-For", "198.51.100.1"), http.StatusOK)
	plugintest.WantStatus(t, g.Get("/"), http.StatusOK)
}

// Inside the gateway the router's client address (gwctx.Info.ClientIP) decides.
func TestIPRestrictionRouterClientIP(t *testing.T) {
	g := startGW(t, []string{`{"handler":"test_gwinfo","client_ip":"203.0.113.5"}`, plugintest.HandlerJSON(t, "ip-restriction", `{"allow":["127.0.0.1"]}`)})
	plugintest.WantStatus(t, g.Get("/"), http.StatusForbidden)
	g = startGW(t, []string{`{"handler":"test_gwinfo","client_ip":"203.0.113.5"}`, plugintest.HandlerJSON(t, "ip-restriction", `{"allow":["203.0.113.0/24"]}`)})
	plugintest.WantStatus(t, g.Get("/"), http.StatusOK)
}
