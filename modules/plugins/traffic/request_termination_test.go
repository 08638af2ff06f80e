package traffic

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/internal/memtest"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestRequestTerminationProvisionRefuses(t *testing.T) {
	// Caddy JSON that skips the admin API is refused at Provision too.
	body := "{file./etc/passwd}"
	if err := (&RequestTermination{Status: 200, Body: &body}).Provision(caddy.Context{}); err == nil || !strings.Contains(err.Error(), "body") {
		t.Errorf("Provision with {file.*}: %v", err)
	}
}

func TestRequestTerminationTraffic(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-termination", `{}`)})
	res := g.Get("/x")
	plugintest.WantStatus(t, res, http.StatusServiceUnavailable)
	plugintest.WantErrorBody(t, res, "service unavailable")

	g = startGW(t, []string{plugintest.HandlerJSON(t, "request-termination", `{"status":418,"message":"teapot"}`)})
	res = g.Do(http.MethodPost, "/x", nil)
	plugintest.WantStatus(t, res, http.StatusTeapot)
	plugintest.WantErrorBody(t, res, "teapot")

	g = startGW(t, []string{plugintest.HandlerJSON(t, "request-termination", `{"status":200,"body":"<p>maintenance on {http.request.uri.path}</p>","content_type":"text/html; charset=utf-8"}`)})
	res = g.Get("/page")
	plugintest.WantStatus(t, res, http.StatusOK)
	if res.Body != "<p>maintenance on /page</p>" || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("raw body %q, Content-Type %q", res.Body, res.Header.Get("Content-Type"))
	}

	g = startGW(t, []string{plugintest.HandlerJSON(t, "request-termination", `{"body":"{\"down\":true}"}`)})
	res = g.Get("/")
	plugintest.WantStatus(t, res, http.StatusServiceUnavailable)
	if res.Body != `{"down":true}` || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("raw body %q, Content-Type %q", res.Body, res.Header.Get("Content-Type"))
	}
	// The content type is literal, never expanded.
	g = startGW(t, []string{plugintest.HandlerJSON(t, "request-termination", `{"body":"x","content_type":"text/{env.HOME}"}`)})
	if ct := g.Get("/").Header.Get("Content-Type"); ct != "text/{env.HOME}" {
		t.Fatalf("Content-Type %q", ct)
	}
	if n := len(g.Upstream.Requests()); n != 0 {
		t.Fatalf("terminated requests reached the upstream (%d)", n)
	}
}

// TestRequestTerminationBodyBounded: what placeholders add to a raw body is
// bounded as the transforms' values are (a body may repeat a placeholder
// of a client's header tens of thousands of times): exactly 64 KiB more
// than the body passes, one byte more is 431, and such a request costs
// about its own size.
func TestRequestTerminationBodyBounded(t *testing.T) {
	body := strings.Repeat("{http.request.header.X-Big}", 2000) // 54,000 bytes
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-termination", `{"status":200,"body":"`+body+`","content_type":"text/plain"}`)}, bigHeaders)
	var res plugintest.Result
	n := memtest.Allocated(func() { res = g.Get("/", "X-Big", strings.Repeat("b", 100<<10)) })
	plugintest.WantGatewayError(t, res, http.StatusRequestHeaderFieldsTooLarge)
	if !strings.Contains(res.Error, "request-termination body") {
		t.Errorf("error %q", res.Error)
	}
	// 2000 · 100 KB = 200 MB without the bound.
	if n > 8<<20 {
		t.Errorf("one request allocated %d MB", n>>20)
	}
	fits := (len(body) + maxExpanded) / 2000
	res = g.Get("/", "X-Big", strings.Repeat("b", fits))
	plugintest.WantStatus(t, res, http.StatusOK)
	if len(res.Body) != 2000*fits || res.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("body of %d bytes, want %d; Content-Type %q", len(res.Body), 2000*fits, res.Header.Get("Content-Type"))
	}
	plugintest.WantGatewayError(t, g.Get("/", "X-Big", strings.Repeat("b", fits+1)), http.StatusRequestHeaderFieldsTooLarge)
}
