package acmedns

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/pebbletest"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// validatingPebble starts an ACME CA that really validates challenges:
// every name resolves to 127.0.0.1 and HTTP-01 is fetched from httpPort.
func validatingPebble(t *testing.T, httpPort int) (directory, rootsFile string) {
	c := pebbletest.Start(t, pebbletest.Options{Validate: true, HTTPPort: httpPort})
	return c.Directory, c.RootsFile
}

func port(t *testing.T, addr string) int {
	_, p := testgw.HostPort(t, addr)
	return p
}

// certificate is GET /api/v1/certificates' entry for id.
func certificate(t *testing.T, g *testgw.Gateway, id int64) map[string]any {
	t.Helper()
	var list []map[string]any
	g.JSON("GET", "/api/v1/certificates", nil, &list)
	for _, c := range list {
		if testgw.ID(c) == id {
			return c
		}
	}
	t.Fatalf("certificate %d not listed: %v", id, list)
	return nil
}

// waitCertificate polls certificate id until ok holds.
func waitCertificate(t *testing.T, g *testgw.Gateway, id int64, what string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c := certificate(t, g, id)
		if ok(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("certificate %d: %s: %v", id, what, c)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func servedLeaf(t *testing.T, addr, sni string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS to the gateway: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// TestCertificateStatusFromEvents: the CA validates the gateway's HTTP-01
// answer for real; status, issuer and validity come from Caddy's events
// and describe the certificate the gateway serves. A forced renewal gets
// a new certificate, served from the next handshake.
func TestCertificateStatusFromEvents(t *testing.T) {
	httpAddr, httpsAddr := testgw.FreeAddr(t), testgw.FreeAddr(t)
	directory, roots := validatingPebble(t, port(t, httpAddr))
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"acme_trusted_roots_pem_files": []string{roots}}})
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": httpAddr, "https_listen": httpsAddr,
		"https_enabled": true, "acme_directory_url": directory, "acme_email": "ops@events.test"})
	created := g.Must("POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"events.test"}})
	id := testgw.ID(created)
	c := waitCertificate(t, g, id, "not issued", func(c map[string]any) bool { return c["status"] == "active" })
	leaf := servedLeaf(t, httpsAddr, "events.test")
	if c["last_error"] != nil || c["issuer"] != leaf.Issuer.CommonName || !strings.Contains(leaf.Issuer.CommonName, "Pebble") ||
		c["fingerprint_sha256"] != fingerprint(leaf) ||
		c["not_before"] != leaf.NotBefore.UTC().Format(time.RFC3339) || c["not_after"] != leaf.NotAfter.UTC().Format(time.RFC3339) {
		t.Fatalf("issued certificate %v; served %s issued by %q, %v..%v", c, fingerprint(leaf), leaf.Issuer.CommonName, leaf.NotBefore, leaf.NotAfter)
	}
	// The events arrive through a subscription made while the config is
	// provisioned (app gateway_certificate_events), not one configured in
	// the events app: the events app subscribes those in its Start,
	// racing with the obtain the tls app may already have started (a
	// fatal concurrent map access; certevents.App).
	apps := testgw.CaddyConfig(t, g.CaddyAdmin, "/config/apps/")
	if events := testgw.CaddyConfig(t, g.CaddyAdmin, "/config/apps/events/"); strings.Contains(events, "gateway_certificates") ||
		!strings.Contains(apps, `"gateway_certificate_events":{}`) {
		t.Fatalf("certificate events subscribed in the events app's config (%s), or no gateway_certificate_events app", events)
	}

	// A forced renewal of the still-valid certificate.
	time.Sleep(1100 * time.Millisecond) // a later not_before than the first one's
	if got := g.Must("POST", "/api/v1/certificates/"+strconv.FormatInt(id, 10)+"/renew", nil); got["queued"] != true || len(got) != 1 {
		t.Fatalf("renew: %v", got)
	}
	renewed := waitCertificate(t, g, id, "not renewed", func(r map[string]any) bool {
		return r["status"] == "active" && r["fingerprint_sha256"] != c["fingerprint_sha256"]
	})
	if renewed["not_before"].(string) <= c["not_before"].(string) || renewed["last_error"] != nil {
		t.Fatalf("renewed %v after %v", renewed, c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := servedLeaf(t, httpsAddr, "events.test")
		if fingerprint(now) == renewed["fingerprint_sha256"] {
			if now.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
				t.Fatalf("renewed certificate has the old serial %v", now.SerialNumber)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate %v is not served: still %s", renewed["fingerprint_sha256"], fingerprint(now))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A restore replaces the row within one change (the name stays
	// managed, so Caddy emits nothing new): the restored certificate shows
	// what Caddy serves.
	var doc map[string]any
	g.JSON("GET", "/api/v1/export", nil, &doc)
	g.Must("POST", "/api/v1/import", doc)
	var list []map[string]any
	g.JSON("GET", "/api/v1/certificates", nil, &list)
	if len(list) != 1 || testgw.ID(list[0]) == id {
		t.Fatalf("certificates after the restore: %v", list)
	}
	waitCertificate(t, g, testgw.ID(list[0]), "restored certificate not active", func(r map[string]any) bool {
		return r["status"] == "active" && r["fingerprint_sha256"] == renewed["fingerprint_sha256"]
	})
}

// TestCertificateFailureSaysWhy: the CA cannot reach the challenge (its
// HTTP-01 port is closed): the certificate is failed and last_error holds
// the CA's reason.
func TestCertificateFailureSaysWhy(t *testing.T) {
	closed := testgw.RefusingAddr(t)
	directory, roots := validatingPebble(t, port(t, closed))
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"acme_trusted_roots_pem_files": []string{roots}}})
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": testgw.FreeAddr(t),
		"https_enabled": true, "acme_directory_url": directory, "acme_email": "ops@events.test"})
	created := g.Must("POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"unreachable.test"}})
	c := waitCertificate(t, g, testgw.ID(created), "not failed", func(c map[string]any) bool { return c["status"] == "failed" })
	msg, _ := c["last_error"].(string)
	if !strings.Contains(msg, "connection refused") || !strings.Contains(msg, strconv.Itoa(port(t, closed))) {
		t.Fatalf("last_error does not say why: %v", c)
	}
	if c["issuer"] != nil || c["not_after"] != nil || c["fingerprint_sha256"] != nil {
		t.Fatalf("failed certificate: %v", c)
	}
}
