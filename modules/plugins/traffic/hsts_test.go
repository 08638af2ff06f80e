package traffic

import (
	"net/http"
	"testing"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestHSTSConfig(t *testing.T) {
	wantDefaults(t, "hsts", `{}`, `{"max_age_s":31536000,"include_subdomains":false,"preload":false}`)
	wantDefaults(t, "hsts", `{"max_age_s":0,"preload":true}`, `{"max_age_s":0,"include_subdomains":false,"preload":true}`)
	wantConfigErrors(t, "hsts", map[string]string{
		`{"max_age_s":-5}`:             "config.max_age_s",
		`{"include_subdomains":"yes"}`: "config.include_subdomains",
		`{"max-age":1}`:                "config.max-age",
	})
	wantCaddyfile(t, "gateway_hsts {\n include_subdomains\n preload true\n}",
		`{"handler":"gateway_hsts","max_age_s":31536000,"include_subdomains":true,"preload":true}`)
}

func TestHSTSTraffic(t *testing.T) {
	g := startGW(t, []string{handlerJSON(t, "hsts", `{}`)}, plugintest.WithTLS())
	res := g.Get(g.TLSURL + "/")
	plugintest.WantStatus(t, res, http.StatusOK)
	if res.TLS == nil {
		t.Fatal("not an HTTPS response")
	}
	if got := res.Header.Values("Strict-Transport-Security"); len(got) != 1 || got[0] != "max-age=31536000" {
		t.Fatalf("HTTPS: Strict-Transport-Security %q", got)
	}
	res = g.Get("/")
	plugintest.WantStatus(t, res, http.StatusOK)
	if got := res.Header.Get("Strict-Transport-Security"); got != "" {
		t.Fatalf("plain HTTP got Strict-Transport-Security %q", got)
	}

	g = startGW(t, []string{handlerJSON(t, "hsts", `{"max_age_s":600,"include_subdomains":true,"preload":true}`)}, plugintest.WithTLS(),
		plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Strict-Transport-Security", "max-age=1")
		}))
	res = g.Get(g.TLSURL + "/")
	if got := res.Header.Values("Strict-Transport-Security"); len(got) != 1 || got[0] != "max-age=600; includeSubDomains; preload" {
		t.Fatalf("Strict-Transport-Security %q", got)
	}
}
