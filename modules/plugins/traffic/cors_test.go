package traffic

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestCORSProvisionRefuses(t *testing.T) {
	// Caddy JSON that skips the admin API is refused at Provision too.
	if err := (&CORS{AllowOrigins: []string{"*"}, AllowCredentials: true}).Provision(caddy.Context{}); err == nil || !strings.Contains(err.Error(), "allow_credentials") {
		t.Errorf("Provision of * with credentials: %v", err)
	}
}

func TestCORSPreflight(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "cors", `{"allow_origins":["https://app.example","*.example.com"]}`)})
	pre := func(origin string, hdr ...string) plugintest.Result {
		return g.Do(http.MethodOptions, "/api", nil, append([]string{"Origin", origin, "Access-Control-Request-Method", "PUT"}, hdr...)...)
	}
	res := pre("https://app.example", "Access-Control-Request-Headers", "X-Foo, Content-Type")
	plugintest.WantStatus(t, res, http.StatusNoContent)
	want := map[string]string{
		"Access-Control-Allow-Origin":  "https://app.example",
		"Access-Control-Allow-Methods": "GET, HEAD, PUT, PATCH, POST, DELETE",
		"Access-Control-Allow-Headers": "X-Foo, Content-Type", // reflected
		"Access-Control-Max-Age":       "600",
	}
	for k, v := range want {
		if got := res.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if res.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Error("credentials header without allow_credentials")
	}
	if vary := res.Header.Values("Vary"); len(vary) == 0 || vary[0] != "Origin" {
		t.Errorf("Vary %q", vary)
	}
	// wildcard host (any depth), not the bare domain
	if got := pre("https://a.b.example.com").Header.Get("Access-Control-Allow-Origin"); got != "https://a.b.example.com" {
		t.Errorf("wildcard origin: %q", got)
	}
	res = pre("https://example.com")
	plugintest.WantStatus(t, res, http.StatusNoContent)
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("bare domain allowed: %q", got)
	}
	if got := pre("https://evil.example").Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("other origin allowed: %q", got)
	}
	if n := len(g.Upstream.Requests()); n != 0 {
		t.Fatalf("%d preflights reached the upstream", n)
	}
	// an OPTIONS without Access-Control-Request-Method is an actual request
	plugintest.WantStatus(t, g.Do(http.MethodOptions, "/api", nil, "Origin", "https://app.example"), http.StatusOK)
	if n := len(g.Upstream.Requests()); n != 1 {
		t.Fatalf("plain OPTIONS: upstream saw %d requests", n)
	}
}

func TestCORSActualRequests(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "cors", `{"allow_origins":["https://app.example"],"allow_credentials":true,"expose_headers":["X-Request-ID","X-Total"],"allow_headers":["Authorization"],"max_age_s":0}`)},
		plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
			// an upstream granting every origin, with credentials: the
			// gateway's config wins
			w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
			w.Header().Set("Access-Control-Allow-Credentials", "true")
			w.Header().Set("Access-Control-Expose-Headers", "X-Secret")
			w.Header().Set("Vary", "Accept-Encoding")
		}))
	res := g.Get("/", "Origin", "https://app.example")
	plugintest.WantStatus(t, res, http.StatusOK)
	if got := res.Header.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != "https://app.example" {
		t.Errorf("Allow-Origin %q", got)
	}
	if got := res.Header.Values("Access-Control-Allow-Credentials"); len(got) != 1 || got[0] != "true" {
		t.Errorf("Allow-Credentials %q", got)
	}
	if got := res.Header.Values("Access-Control-Expose-Headers"); len(got) != 1 || got[0] != "X-Request-ID, X-Total" {
		t.Errorf("Expose-Headers %q", got)
	}
	if got := res.Header.Values("Vary"); len(got) != 2 || !slices.Contains(got, "Accept-Encoding") || !slices.Contains(got, "Origin") {
		t.Errorf("Vary %q", got)
	}
	// disallowed origin: proxied, and no CORS grant at all (the
	// upstream's reflected one is removed)
	res = g.Get("/", "Origin", "https://evil.example")
	plugintest.WantStatus(t, res, http.StatusOK)
	for _, k := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Expose-Headers"} {
		if got := res.Header.Values(k); len(got) != 0 {
			t.Errorf("disallowed origin: %s %q", k, got)
		}
	}
	// no Origin: no grant either, and Vary: Origin, so that a cache does
	// not answer a CORS request with it
	res = g.Get("/")
	if got := res.Header.Values("Vary"); len(got) != 2 || !slices.Contains(got, "Origin") {
		t.Errorf("no Origin: Vary %q", got)
	}
	if got := res.Header.Values("Access-Control-Allow-Origin"); len(got) != 0 {
		t.Errorf("no Origin: Allow-Origin %q", got)
	}
	// preflight: configured headers, no Max-Age, credentials echo the origin
	res = g.Do(http.MethodOptions, "/", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "X-Other")
	plugintest.WantStatus(t, res, http.StatusNoContent)
	if res.Header.Get("Access-Control-Allow-Headers") != "Authorization" || res.Header.Get("Access-Control-Max-Age") != "" ||
		res.Header.Get("Access-Control-Allow-Credentials") != "true" || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("preflight headers %v", res.Header)
	}
}

func TestCORSAnyOrigin(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "cors", `{}`)})
	res := g.Get("/", "Origin", "https://whatever.test")
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Fatalf("Allow-Origin %q, want *", got)
	}
	// the same answer without Origin (it does not depend on it: no Vary)
	res = g.Get("/")
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != "*" || len(res.Header.Values("Vary")) != 0 {
		t.Fatalf("no Origin: Allow-Origin %q, Vary %q", got, res.Header.Values("Vary"))
	}
	g.Upstream.Close() // proxy error responses carry the headers too
	res = g.Get("/", "Origin", "https://whatever.test")
	if res.StatusCode != http.StatusBadGateway || res.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("502: status %d, Allow-Origin %q", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
	}
}
