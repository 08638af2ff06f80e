// Package tlsupstream tests https services: upstream TLS is verified against
// the system roots with tls_sni as the server name. It is its own package
// (its own test process) because it puts a test CA into the system roots
// (SSL_CERT_FILE) before anything loads them.
package tlsupstream

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

var upstream *httptest.Server

func TestMain(m *testing.M) {
	upstream = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		fmt.Fprintf(w, "tls upstream, sni %s", r.TLS.ServerName)
	}))
	dir, _ := os.MkdirTemp("", "tlsupstream")
	ca := filepath.Join(dir, "ca.pem")
	// httptest's certificate is self-signed: it is its own CA. It names
	// example.com and 127.0.0.1.
	_ = os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw}), 0o600)
	os.Setenv("SSL_CERT_FILE", ca)
	code := m.Run()
	upstream.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestHTTPSUpstreamVerifiedWithSNI(t *testing.T) {
	g := testgw.Start(t, &testgw.Options{HealthInterval: 50 * time.Millisecond})
	host, port := testgw.HostPort(t, testgw.Addr(upstream))
	svc := testgw.ID(g.Must("POST", "/api/v1/services", map[string]any{
		"name": "secure", "protocol": "https", "tls_sni": "example.com", "health_path": "/health"}))
	g.Must("POST", fmt.Sprintf("/api/v1/services/%d/targets", svc), map[string]any{"host": host, "port": port})
	g.Route("secure", svc, map[string]any{"paths": []string{"/secure"}})

	st, body, _ := g.Get("", "/secure")
	if st != 200 || body != "tls upstream, sni example.com" {
		t.Fatalf("https upstream: %d %q", st, body)
	}
	// The HTTPS health check verifies TLS with tls_sni too.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var hs []map[string]any
		g.JSON("GET", "/api/v1/health", nil, &hs)
		if len(hs) == 1 && hs[0]["state"] == "healthy" && hs[0]["check"] == "http" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("https health check: %v", hs)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A server name the certificate does not cover fails verification.
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", svc), map[string]any{"name": "secure", "protocol": "https", "tls_sni": "wrong.test", "retries": 0})
	st, body, _ = g.Get("", "/secure")
	if st != 502 {
		t.Fatalf("unverifiable upstream certificate answered %d %q", st, body)
	}
	// Plain http to a TLS port fails as well: protocol is honoured.
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", svc), map[string]any{"name": "secure", "retries": 0})
	if st, _, _ = g.Get("", "/secure"); st == 200 {
		t.Fatal("http service reached a TLS upstream")
	}
}

func TestTimeouts(t *testing.T) {
	g := testgw.Start(t, nil)
	slow := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(700 * time.Millisecond)
		io.WriteString(w, "late")
	})
	host, port := testgw.HostPort(t, testgw.Addr(slow))
	svc := testgw.ID(g.Must("POST", "/api/v1/services", map[string]any{"name": "slow", "read_timeout_ms": 200, "retries": 0}))
	g.Must("POST", fmt.Sprintf("/api/v1/services/%d/targets", svc), map[string]any{"host": host, "port": port})
	g.Route("slow", svc, nil)
	start := time.Now()
	st, body, _ := g.Get("", "/")
	if st != 504 || time.Since(start) > 600*time.Millisecond {
		t.Fatalf("read timeout 200 ms: %d %q after %v", st, body, time.Since(start))
	}
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", svc), map[string]any{"name": "slow", "read_timeout_ms": 2000})
	if st, body, _ = g.Get("", "/"); st != 200 || body != "late" {
		t.Fatalf("read timeout 2 s: %d %q", st, body)
	}
}
