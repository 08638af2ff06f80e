package acmedns

import (
	"crypto/tls"
	"strconv"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestACMECertificateIssuedAndServed: an http-01 ACME certificate issued
// through the gateway and served by SNI on its HTTPS listener.
func TestACMECertificateIssuedAndServed(t *testing.T) {
	directory, roots := pebble(t, false, "", "")
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"acme_trusted_roots_pem_files": []string{roots}}})
	httpsAddr := testgw.FreeAddr(t)
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": httpsAddr,
		"https_enabled": true, "acme_directory_url": directory, "acme_email": "ops@acme.test"})
	cert := g.Must("POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"acme.test"}})
	if cert["acme"] != true || cert["status"] != "pending" || cert["not_after"] != nil {
		t.Fatalf("new ACME certificate: %v", cert)
	}
	id := testgw.ID(cert)
	issued := waitActive(t, g, id)
	if issued["not_after"] == nil || issued["fingerprint_sha256"] == nil {
		t.Fatalf("issued certificate: %v", issued)
	}
	conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "acme.test", InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS to the gateway: %v", err)
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "acme.test" || leaf.Issuer.CommonName == "" {
		t.Fatalf("served certificate: %v issued by %v", leaf.DNSNames, leaf.Issuer)
	}
	if got := g.Must("POST", "/api/v1/certificates/"+strconv.FormatInt(id, 10)+"/renew", nil); got["queued"] != true {
		t.Fatalf("renew: %v", got)
	}
}
