package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/adminext/controlplane"
	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/proxybench"
)

// BenchmarkProxyPath serves requests in-process through the gateway's whole
// proxy path (the listener's handler: router, plugin chain, the service's
// reverse proxy to a real upstream on 127.0.0.1, request record, metrics),
// without a client connection, for the bare route and the four-plugin chain
// of bench/proxy.sh (request-id, key-auth, rate-limit, response-transform).
// allocs/op is the figure to track (bench/README.md): the chain's extra
// allocations are the difference between the two; ns/op includes the
// upstream round trip over loopback.
func BenchmarkProxyPath(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello from the upstream, a small body of about sixty bytes."))
	}))
	defer up.Close()
	g := testgw.Start(b, &testgw.Options{NoOpenAPICheck: true})
	svc := g.Service("bench", strings.TrimPrefix(up.URL, "http://"))
	g.Route("plain", svc, map[string]any{"paths": []string{"/plain"}})
	chain := g.Route("chain", svc, map[string]any{"paths": []string{"/chain"}})
	for _, p := range []map[string]any{
		{"type": "request-id"},
		{"type": "key-auth"},
		{"type": "rate-limit", "config": map[string]any{"limit": 1000000000, "window_s": 60}},
		{"type": "response-transform", "config": map[string]any{"set_headers": map[string]string{"X-Served-By": "gateway"}}},
	} {
		p["scope"], p["route_id"] = "route", chain
		g.Must("POST", "/api/v1/plugins", p)
	}
	c := g.Must("POST", "/api/v1/consumers", map[string]any{"username": "bench"})
	g.Must("POST", fmt.Sprintf("/api/v1/consumers/%d/credentials", testgw.ID(c)), map[string]any{"type": "key-auth", "key": "bench-key"})
	h := controlplane.Current().ProxyHandler()

	for _, path := range []string{"/plain", "/chain"} {
		b.Run(strings.TrimPrefix(path, "/"), func(b *testing.B) {
			w := &proxybench.Writer{}
			serve := func() {
				w.Reset()
				h.ServeHTTP(w, proxybench.Request(g.ProxyAddr, path))
			}
			serve()
			if w.Status != http.StatusOK {
				b.Fatalf("%s answered %d", path, w.Status)
			}
			proxybench.Run(b, serve)
			if w.Status != http.StatusOK {
				b.Fatalf("%s answered %d", path, w.Status)
			}
		})
	}
}
