package traffic

import (
	"net/http"
	"testing"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestRedirectLocation(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "redirect", `{"location":"https://new.example/base/"}`)})
	res := g.Get("/a/b?x=1&y=%20")
	plugintest.WantStatus(t, res, http.StatusPermanentRedirect)
	if got := res.Header.Get("Location"); got != "https://new.example/base/a/b?x=1&y=%20" {
		t.Fatalf("Location %q", got)
	}
	if len(g.Upstream.Requests()) != 0 {
		t.Fatal("redirected request reached the upstream")
	}

	g = startGW(t, []string{plugintest.HandlerJSON(t, "redirect", `{"location":"http://other.example/landing","keep_path":false,"status":302}`)})
	res = g.Do(http.MethodPost, "/a?b", nil)
	plugintest.WantStatus(t, res, http.StatusFound)
	if got := res.Header.Get("Location"); got != "http://other.example/landing" {
		t.Fatalf("Location %q", got)
	}
}

func TestRedirectToHTTPS(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "redirect", `{"to_https":true}`)}, plugintest.WithTLS())
	res := g.Get("/p/q?r=1", "Host", "shop.example:8080")
	plugintest.WantStatus(t, res, http.StatusPermanentRedirect)
	if got := res.Header.Get("Location"); got != "https://shop.example/p/q?r=1" {
		t.Fatalf("Location %q (443 is omitted)", got)
	}
	res = g.Get("/", "Host", "[::1]:8080")
	if got := res.Header.Get("Location"); got != "https://[::1]/" {
		t.Fatalf("IPv6 Location %q", got)
	}
	// HTTPS requests pass
	res = g.Get(g.TLSURL + "/secure")
	plugintest.WantStatus(t, res, http.StatusOK)
	if got := g.Upstream.Last().URI; got != "/secure" {
		t.Fatalf("upstream saw %q", got)
	}
	if len(g.Upstream.Requests()) != 1 {
		t.Fatal("plain requests reached the upstream")
	}
}

func TestRedirectToHTTPSPort(t *testing.T) {
	// the gateway router's HTTPS listener port wins over https_port
	g := startGW(t, []string{`{"handler":"test_gwinfo","https_port":8443}`,
		`{"handler":"gateway_redirect","to_https":true,"location":"","status":301,"keep_path":false,"https_port":9443}`})
	res := g.Get("/x", "Host", "shop.example")
	plugintest.WantStatus(t, res, http.StatusMovedPermanently)
	if got := res.Header.Get("Location"); got != "https://shop.example:8443/" {
		t.Fatalf("Location %q", got)
	}
	g = startGW(t, []string{`{"handler":"gateway_redirect","to_https":true,"location":"","status":307,"keep_path":true,"https_port":9443}`})
	res = g.Get("/x", "Host", "shop.example")
	plugintest.WantStatus(t, res, http.StatusTemporaryRedirect)
	if got := res.Header.Get("Location"); got != "https://shop.example:9443/x" {
		t.Fatalf("Location %q", got)
	}
}

// Caddy loading a raw config runs the full checks too.
func TestRedirectRawConfigChecked(t *testing.T) {
	err := caddyLoadErr(t, `{"handler":"gateway_redirect","to_https":true,"status":200}`)
	if err == nil {
		t.Fatal("status 200 accepted by caddy.Load")
	}
}
