package router_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/proxybench"
	_ "github.com/caddy-gateway/gateway/modules/plugins/auth"
	_ "github.com/caddy-gateway/gateway/modules/plugins/ratelimit"
	_ "github.com/caddy-gateway/gateway/modules/plugins/traffic"
	"github.com/caddy-gateway/gateway/modules/router"
)

// provision builds a router from its JSON config, cleaned up with tb.
func provision(tb testing.TB, cfg string) *router.Router {
	tb.Helper()
	var rt router.Router
	if err := json.Unmarshal([]byte(cfg), &rt); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	tb.Cleanup(cancel)
	if err := rt.Provision(ctx); err != nil {
		tb.Fatal(err)
	}
	return &rt
}

// BenchmarkChain measures what the gateway itself adds to a request, with
// no network: the router and the four-plugin chain of bench/proxy.sh
// (request-id, key-auth, rate-limit, response-transform) in front of a
// service that answers at once (Caddy's static_response instead of a
// reverse proxy). "plain" is the same route without plugins; the chain's
// cost is the difference. The whole proxy path, upstream included, is
// app/tests' BenchmarkProxyPath.
func BenchmarkChain(b *testing.B) {
	cfg := `{
		"routes": [
			{"id": 1, "service_id": 1, "paths": ["/plain"]},
			{"id": 2, "service_id": 1, "paths": ["/chain"], "plugins": [1, 2, 3, 4]}
		],
		"services": {"1": {"handler": "static_response", "body": "hello from the upstream, a small body of about sixty bytes."}},
		"plugins": {
			"1": {"handler": "gateway_request_id", "header_name": "X-Request-ID", "trust_incoming": true, "echo_downstream": true},
			"2": {"handler": "gateway_key_auth", "key_names": ["apikey"]},
			"3": {"handler": "gateway_rate_limit", "limit": 1000000000, "window_s": 60, "key": "ip", "instance_id": 3},
			"4": {"handler": "gateway_response_transform", "set_headers": {"X-Served-By": "gateway"}}
		},
		"consumers": [{"id": 1, "username": "bench", "credentials": [{"id": 1, "type": "key-auth", "key": "bench-key"}]}]
	}`
	rt := provision(b, cfg)
	srv := &caddyhttp.Server{}
	for _, path := range []string{"/plain", "/chain"} {
		b.Run(path[1:], func(b *testing.B) {
			w := &proxybench.Writer{}
			serve := func() {
				// what the gateway's proxy listener does before the router:
				// the request's Info and recording writer (one allocation)
				st := &struct {
					info gwctx.Info
					rw   gwctx.RecordingWriter
				}{info: gwctx.Info{Start: time.Now(), RecordBuilt: true}}
				st.rw.ResponseWriter = w
				r := proxybench.Request("127.0.0.1:8080", path)
				r = gwctx.With(r, &st.info)
				r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), &st.rw, srv)
				w.Reset()
				if err := rt.ServeHTTP(&st.rw, r, nil); err != nil {
					b.Fatal(err)
				}
			}
			serve()
			if w.Status != http.StatusOK || (path == "/chain" && w.Header().Get("X-Served-By") != "gateway") {
				b.Fatalf("%s answered %d %v", path, w.Status, w.Header())
			}
			proxybench.Run(b, serve)
		})
	}
}
