// Package acme issues a certificate through the gateway's ACME path against
// a real ACME CA (Pebble) running in the test on 127.0.0.1. It is its own
// package (its own process) because Pebble's "always valid" switch and
// Caddy's storage folder are process environment.
package acme

import (
	"crypto/tls"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

func TestMain(m *testing.M) {
	// Pebble skips challenge validation (nothing may leave 127.0.0.1), and
	// Caddy keeps issued certificates in a throw-away folder.
	os.Setenv("PEBBLE_VA_ALWAYS_VALID", "1")
	dir, _ := os.MkdirTemp("", "gateway-acme")
	os.Setenv("XDG_DATA_HOME", dir)
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func pebble(t *testing.T) (directory, rootsFile string) {
	logger := log.New(io.Discard, "", 0)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "test"}})
	validator := va.New(logger, 80, 443, false, "", store)
	front := wfe.New(logger, store, validator, authority, nil, false, false, 0, 0)
	srv := httptest.NewTLSServer(front.Handler())
	t.Cleanup(srv.Close)
	rootsFile = filepath.Join(t.TempDir(), "pebble-https.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(rootsFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL + "/dir", rootsFile
}

func TestACMECertificateIssuedAndServed(t *testing.T) {
	directory, roots := pebble(t)
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"acme_trusted_roots_pem_files": []string{roots}}})
	httpsAddr := testgw.FreeAddr(t)
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": httpsAddr,
		"https_enabled": true, "acme_directory_url": directory, "acme_email": "ops@acme.test"})
	cert := g.Must("POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"acme.test"}})
	if cert["acme"] != true || cert["status"] != "pending" || cert["not_after"] != nil {
		t.Fatalf("new ACME certificate: %v", cert)
	}
	id := testgw.ID(cert)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var list []map[string]any
		g.JSON("GET", "/api/v1/certificates", nil, &list)
		if len(list) == 1 && list[0]["status"] == "active" {
			if testgw.ID(list[0]) != id || list[0]["not_after"] == nil || list[0]["fingerprint_sha256"] == nil {
				t.Fatalf("issued certificate: %v", list[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("certificate not issued: %v", list)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The HTTPS listener serves it by SNI.
	conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "acme.test", InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS to the gateway: %v", err)
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "acme.test" || leaf.Issuer.CommonName == "" {
		t.Fatalf("served certificate: %v issued by %v", leaf.DNSNames, leaf.Issuer)
	}
	// Renew queues an ACME certificate.
	if got := g.Must("POST", "/api/v1/certificates/"+itoa(id)+"/renew", nil); got["queued"] != true {
		t.Fatalf("renew: %v", got)
	}

}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
