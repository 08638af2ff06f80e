package router_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/modules/gwctx"
)

// TestLookalikeHeadersRemoved: the router removes a client's identity and
// X-Forwarded-* headers spelled with '_' (any case), which CGI-style
// upstreams read as the real ones, whatever the server in front let
// through (Caddy's own server drops names with '_' unless configured
// otherwise; this drives the router directly). Other headers with '_' pass.
func TestLookalikeHeadersRemoved(t *testing.T) {
	rt := provision(t, `{
		"routes": [{"id": 1, "service_id": 1, "paths": ["/"]}],
		"services": {"1": {"handler": "router_test_seen"}}
	}`)
	r := httptest.NewRequest("GET", "http://gw.test/", nil)
	r.RemoteAddr = "192.0.2.7:4000" // not a trusted proxy
	for _, name := range []string{"X_Consumer_Username", "x_consumer_id", "X-Consumer_Groups", "X_CONSUMER_CUSTOM_ID", "X_Forwarded_For", "x_forwarded_host", "X_Other_Header"} {
		r.Header[name] = []string{"forged"}
	}
	w := httptest.NewRecorder()
	r = gwctx.With(r, &gwctx.Info{Start: time.Now(), RecordBuilt: true})
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, &caddyhttp.Server{})
	if err := rt.ServeHTTP(w, r, nil); err != nil {
		t.Fatal(err)
	}
	seen := strings.Split(w.Body.String(), ",")
	if !slices.Contains(seen, "X_Other_Header") {
		t.Fatalf("a header with '_' that is no lookalike was removed: upstream saw %q", seen)
	}
	for _, name := range seen {
		if n := strings.ToLower(strings.ReplaceAll(name, "_", "-")); strings.HasPrefix(n, "x-consumer-") || strings.HasPrefix(n, "x-forwarded-") {
			t.Errorf("the upstream saw the client's %s", name)
		}
	}
}

// seenUpstream answers with the names of the request headers it got.
type seenUpstream struct{}

func init() { caddy.RegisterModule(seenUpstream{}) }

func (seenUpstream) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.router_test_seen", New: func() caddy.Module { return new(seenUpstream) }}
}

func (seenUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	var names []string
	for k := range r.Header {
		names = append(names, k)
	}
	_, _ = w.Write([]byte(strings.Join(names, ",")))
	return nil
}
