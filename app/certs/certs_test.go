package certs_test

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/certtest"
)

type pair struct {
	cert, key string
	der       []byte
}

// issue makes a certificate for names valid until notAfter (from two days
// ago), signed by ca (self-signed when nil), its key in PKCS #8.
func issue(t *testing.T, ca *certtest.Cert, notAfter time.Time, names ...string) pair {
	t.Helper()
	c := certtest.Issue(t, certtest.Options{NotBefore: time.Now().Add(-2 * time.Hour).Add(-48 * time.Hour), NotAfter: notAfter, CA: ca, PKCS8: true}, names...)
	return pair{cert: c.CertPEM, key: c.KeyPEM, der: c.Leaf.Raw}
}

// testCA is a certificate authority for issue.
func testCA(t *testing.T) *certtest.Cert {
	return certtest.Issue(t, certtest.Options{IsCA: true}, "Gateway Test CA")
}

// TestManualCertificates: upload, validation, status, SNI selection on the
// HTTPS listener, renew and delete; keys never in answers.
func TestManualCertificates(t *testing.T) {
	ca := testCA(t)
	pool := ca.Pool()
	a := issue(t, ca, time.Now().Add(12*time.Hour), "a.test", "*.wild.test")
	b := issue(t, ca, time.Now().Add(12*time.Hour), "b.test")
	old := issue(t, nil, time.Now().Add(-time.Hour), "old.test")
	other := issue(t, ca, time.Now().Add(time.Hour), "other.test")

	g := testgw.Start(t, nil)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "up "+r.Host) })
	sid := g.Service("s", strings.TrimPrefix(up.URL, "http://"))
	g.Route("all", sid, nil)

	// Validation.
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": a.cert}, "key")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": a.cert, "key": other.key}, "key", "does not match")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": "nope", "key": a.key}, "cert")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": a.cert, "key": "nope"}, "key")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": a.cert, "key": a.key, "domains": []string{"a.test"}}, "domains")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"*.x.test"}}, "wildcard")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{}}, "domains")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"x.test"}, "cert": a.cert}, "cert")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"bad name"}}, "domains[0]")
	// ACME names are public DNS names: an IP address or a local name would
	// make Caddy fall back to its internal CA (and its trust store dance).
	for _, bad := range []string{"127.0.0.1", "::1", "[::1]", "10.0.0.1", "1.2.3", "localhost", "a.localhost", "printer.local", "db.internal"} {
		g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"ok.test", bad}}, "domains[1]")
	}
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "challenge": "dns-01", "domains": []string{"*.com"}}, "domains[0]")

	ca1 := g.Must("POST", "/api/v1/certificates", map[string]any{"cert": a.cert, "key": a.key})
	sum := sha256.Sum256(a.der)
	if ca1["status"] != "active" || ca1["acme"] != false || ca1["issuer"] != "Gateway Test CA" ||
		ca1["fingerprint_sha256"] != hex.EncodeToString(sum[:]) || ca1["not_after"] == nil || ca1["last_error"] != nil {
		t.Fatalf("manual certificate: %v", ca1)
	}
	if d := fmt.Sprint(ca1["domains"]); d != "[a.test *.wild.test]" {
		t.Fatalf("domains: %s", d)
	}
	if _, ok := ca1["key"]; ok {
		t.Fatalf("key in answer: %v", ca1)
	}
	cb := g.Must("POST", "/api/v1/certificates", map[string]any{"cert": b.cert, "key": b.key})
	co := g.Must("POST", "/api/v1/certificates", map[string]any{"cert": old.cert, "key": old.key})
	if co["status"] != "expired" {
		t.Fatalf("expired certificate: %v", co)
	}

	st, body := g.Do("GET", "/api/v1/certificates", nil)
	if st != 200 || strings.Contains(string(body), "PRIVATE KEY") || strings.Contains(string(body), `"key"`) {
		t.Fatalf("list: %d %s", st, body)
	}
	if n := strings.Count(string(body), `"id"`); n != 3 {
		t.Fatalf("list has %d certificates: %s", n, body)
	}
	if cfg := g.Must("GET", "/api/v1/config", nil); cfg["certificates"] != float64(3) {
		t.Fatalf("config counts: %v", cfg)
	}

	// The HTTPS listener picks the certificate by SNI.
	httpsAddr := testgw.FreeAddr(t)
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": httpsAddr, "https_enabled": true})
	get := func(sni string) (*http.Response, string, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: sni}}}
		resp, err := c.Get("https://" + httpsAddr + "/x")
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), nil
	}
	for sni, want := range map[string][]byte{"a.test": a.der, "x.wild.test": a.der, "b.test": b.der} {
		resp, txt, err := get(sni)
		if err != nil {
			t.Fatalf("HTTPS %s: %v", sni, err)
		}
		if resp.StatusCode != 200 || !strings.HasPrefix(txt, "up ") || string(resp.TLS.PeerCertificates[0].Raw) != string(want) {
			t.Fatalf("HTTPS %s: %d %q", sni, resp.StatusCode, txt)
		}
		t.Logf("%s over %s", sni, resp.Proto)
	}

	// Applications: https needs an active certificate matching exactly or
	// by wildcard; an expired one does not count.
	app := func(name, domain string) map[string]any {
		return map[string]any{"name": name, "domain": domain, "upstream_url": up.URL, "https": true}
	}
	g.Must("POST", "/api/v1/applications", app("exact", "a.test"))
	g.Must("POST", "/api/v1/applications", app("wild", "app.wild.test"))
	g.WantError(400, "POST", "/api/v1/applications", app("deep", "x.app.wild.test"), "no issued certificate")
	g.WantError(400, "POST", "/api/v1/applications", app("old", "old.test"), "no issued certificate")

	// Export: the key only with secrets; import restores it.
	st, plain := g.Do("GET", "/api/v1/export", nil)
	if st != 200 || strings.Contains(string(plain), "PRIVATE KEY") || !strings.Contains(string(plain), "BEGIN CERTIFICATE") {
		t.Fatalf("export without secrets: %d %.300s", st, plain)
	}
	withSecrets := g.Must("GET", "/api/v1/export?include_secrets=true", nil)
	if n := len(withSecrets["certificates"].([]any)); n != 3 || !strings.Contains(fmt.Sprint(withSecrets["certificates"]), "PRIVATE KEY") {
		t.Fatalf("export with secrets: %d certificates", n)
	}
	rep := g.Must("POST", "/api/v1/import", withSecrets)
	if rep["restored"].(map[string]any)["certificates"] != float64(3) {
		t.Fatalf("import: %v", rep)
	}
	var listed []map[string]any
	g.JSON("GET", "/api/v1/certificates", nil, &listed)
	for _, c := range listed {
		if fmt.Sprint(c["domains"]) == "[b.test]" {
			cb = c
		}
	}
	if len(listed) != 3 || cb == nil {
		t.Fatalf("after import: %v", listed)
	}

	// Renew: 400 for manual, 404 for missing.
	g.WantError(400, "POST", fmt.Sprintf("/api/v1/certificates/%d/renew", testgw.ID(cb)), nil, "manual")
	g.WantError(404, "POST", "/api/v1/certificates/999/renew", nil)

	// Delete: b.test is no longer served.
	g.Must("DELETE", fmt.Sprintf("/api/v1/certificates/%d", testgw.ID(cb)), nil)
	g.WantError(404, "DELETE", fmt.Sprintf("/api/v1/certificates/%d", testgw.ID(cb)), nil)
	if _, _, err := get("b.test"); err == nil {
		t.Fatal("b.test still served after delete")
	}
	if _, _, err := get("a.test"); err != nil {
		t.Fatalf("a.test after deleting b: %v", err)
	}
}

func TestNameMatches(t *testing.T) {
	for _, c := range []struct {
		name, domain string
		want         bool
	}{
		{"a.test", "a.test", true}, {"A.Test", "a.test", true}, {"*.a.test", "x.a.test", true},
		{"*.a.test", "a.test", false}, {"*.a.test", "y.x.a.test", false}, {"a.test", "b.test", false},
	} {
		if got := certs.NameMatches(c.name, c.domain); got != c.want {
			t.Errorf("NameMatches(%q, %q) = %v", c.name, c.domain, got)
		}
	}
}

// TestManualCertificateNotYetValid: a certificate uploaded ahead of its
// validity (for a rotation) is active, as the contract's pending answers
// carry null validity; its not_before says when clients accept it, and
// it expires after not_after.
func TestManualCertificateNotYetValid(t *testing.T) {
	notBefore := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	c := certtest.Issue(t, certtest.Options{NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour), PKCS8: true}, "later.test")
	g := testgw.Start(t, nil)
	got := g.Must("POST", "/api/v1/certificates", map[string]any{"cert": c.CertPEM, "key": c.KeyPEM})
	if got["status"] != "active" || got["not_before"] != notBefore.UTC().Format(time.RFC3339) || got["issuer"] == nil {
		t.Fatalf("a certificate valid from %v: %v", notBefore, got)
	}
	nb, na := notBefore, notBefore.Add(24*time.Hour)
	row := &certs.Row{NotBefore: &nb, NotAfter: &na, Status: "active"}
	for _, tc := range []struct {
		at   time.Time
		want string
	}{{notBefore.Add(-time.Second), "active"}, {notBefore.Add(time.Second), "active"}, {na.Add(time.Second), "expired"}} {
		if got := certs.View(row, tc.at).Status; got != tc.want {
			t.Errorf("at %v: %s, want %s", tc.at, got, tc.want)
		}
	}
}
