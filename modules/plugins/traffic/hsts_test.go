package traffic

import (
	"net/http"
	"testing"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestHSTSTraffic(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "hsts", `{}`)}, plugintest.WithTLS())
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

	g = startGW(t, []string{plugintest.HandlerJSON(t, "hsts", `{"max_age_s":600,"include_subdomains":true,"preload":true}`)}, plugintest.WithTLS(),
		plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Strict-Transport-Security", "max-age=1")
		}))
	res = g.Get(g.TLSURL + "/")
	if got := res.Header.Values("Strict-Transport-Security"); len(got) != 1 || got[0] != "max-age=600; includeSubDomains; preload" {
		t.Fatalf("Strict-Transport-Security %q", got)
	}
}
