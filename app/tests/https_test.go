package tests

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/certtest"
	"github.com/caddy-gateway/gateway/internal/poll"
)

// startWithCert starts a gateway whose tls app loads a self-signed
// certificate for host (Caddy's own tls app, as a Caddyfile would); pool
// trusts it.
func startWithCert(t *testing.T, host string) (*testgw.Gateway, *x509.CertPool) {
	t.Helper()
	cert, key, pool := certtest.SelfSigned(t, host)
	g := testgw.Start(t, &testgw.Options{Apps: map[string]any{
		"tls": map[string]any{"certificates": map[string]any{"load_pem": []any{map[string]any{"certificate": cert, "key": key}}}},
	}})
	return g, pool
}

// enableHTTPS binds the gateway's HTTPS listener on a free port (settings)
// and returns its address.
func enableHTTPS(t *testing.T, g *testgw.Gateway) string {
	t.Helper()
	httpsAddr := testgw.FreeAddr(t)
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": httpsAddr, "https_enabled": true})
	return httpsAddr
}

// TestHTTPSListener: https_enabled binds the HTTPS listener at once; its
// certificates come from Caddy's tls app (selected by SNI); routes serve
// over both listeners.
func TestHTTPSListener(t *testing.T) {
	g, pool := startWithCert(t, "secure.test")
	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("all", sid, nil)
	httpsAddr := testgw.FreeAddr(t)
	got := g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": httpsAddr, "https_enabled": true})
	if got["https_enabled"] != true {
		t.Fatalf("settings: %v", got)
	}
	// A client that offers h2, as browsers do.
	client := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "secure.test"}}}
	resp, err := client.Get("https://" + httpsAddr + "/over-tls")
	if err != nil {
		t.Fatalf("HTTPS listener: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := testgw.DecodeEcho(t, string(b))
	if resp.StatusCode != 200 || e.Path != "/over-tls" || e.Headers["X-Forwarded-Proto"][0] != "https" {
		t.Fatalf("over TLS: %d %+v", resp.StatusCode, e)
	}
	t.Logf("negotiated %s", resp.Proto)
	g.WantGet("", "/plain", 200) // the HTTP listener next to HTTPS
	// Disabling HTTPS closes the listener.
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": httpsAddr})
	poll.Until(t, "HTTPS listener closed", func() bool {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "secure.test"}}, Timeout: time.Second}
		resp, err := c.Get("https://" + httpsAddr + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
}
