package certs_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestExportImportRoundTrip: one declaration (certs.Certificate) shows a
// certificate in answers, in export documents and takes it back on import.
// Answers carry neither challenge, chain nor key; an export carries the
// ACME challenge and the manual chain, the key only with secrets; an import
// of an export with secrets restores both certificates as they were, and
// one without secrets skips the manual certificate.
func TestExportImportRoundTrip(t *testing.T) {
	ca := testCA(t)
	a := issue(t, ca, time.Now().Add(12*time.Hour), "export.test")

	g := testgw.Start(t, nil)
	// A closed local port as the ACME directory: nothing leaves 127.0.0.1.
	settings := g.Must("GET", "/api/v1/settings", nil)
	settings["acme_directory_url"] = "https://127.0.0.1:1/directory"
	g.Must("PUT", "/api/v1/settings", settings)
	manual := g.Must("POST", "/api/v1/certificates", map[string]any{"cert": a.cert, "key": a.key})
	g.Must("POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"acme.export.test"}, "challenge": "tls-alpn-01"})

	list := func() []map[string]any {
		t.Helper()
		st, b := g.Do("GET", "/api/v1/certificates", nil)
		var out []map[string]any
		if st != 200 || json.Unmarshal(b, &out) != nil {
			t.Fatalf("GET /api/v1/certificates: %d %s", st, b)
		}
		return out
	}
	for _, c := range list() {
		for _, f := range []string{"challenge", "cert", "key"} {
			if _, ok := c[f]; ok {
				t.Errorf("answer carries %s: %v", f, c)
			}
		}
	}

	export := func(secrets bool) map[string]any {
		t.Helper()
		path := "/api/v1/export"
		if secrets {
			path += "?include_secrets=true"
		}
		return g.Must("GET", path, nil)
	}
	certsOf := func(doc map[string]any) []map[string]any {
		t.Helper()
		var out []map[string]any
		for _, c := range doc["certificates"].([]any) {
			out = append(out, c.(map[string]any))
		}
		if len(out) != 2 {
			t.Fatalf("exported certificates: %v", out)
		}
		return out
	}
	plain := certsOf(export(false))
	if plain[0]["cert"] != a.cert || plain[0]["key"] != nil || plain[0]["challenge"] != nil ||
		plain[0]["fingerprint_sha256"] != manual["fingerprint_sha256"] {
		t.Errorf("manual certificate in an export without secrets: %v", plain[0])
	}
	if plain[1]["challenge"] != "tls-alpn-01" || plain[1]["cert"] != nil || plain[1]["key"] != nil {
		t.Errorf("ACME certificate in an export: %v", plain[1])
	}
	full := export(true)
	if c := certsOf(full)[0]; c["key"] != a.key {
		t.Errorf("manual certificate in an export with secrets has no key: %v", c)
	}

	// Without the key the manual certificate is skipped, the ACME one
	// restored.
	st, b := g.Do("POST", "/api/v1/import", export(false))
	if st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	if got := list(); len(got) != 1 || got[0]["acme"] != true {
		t.Fatalf("after an import without secrets: %v", got)
	}

	st, b = g.Do("POST", "/api/v1/import", full)
	if st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	got := list()
	if len(got) != 2 || got[0]["fingerprint_sha256"] != manual["fingerprint_sha256"] || got[0]["status"] != "active" ||
		got[1]["acme"] != true || len(got[1]["domains"].([]any)) != 1 || got[1]["domains"].([]any)[0] != "acme.export.test" {
		t.Fatalf("after an import with secrets: %v", got)
	}
	if c := certsOf(export(true)); c[1]["challenge"] != "tls-alpn-01" || c[0]["key"] != a.key {
		t.Errorf("restored certificates export differently: %v", c)
	}
}

// TestImportManualCertificateNames: a manual certificate's names come from
// its leaf, not from the rules of ACME domains, so a leaf with more than
// 100 SANs or a SAN that is no host name uploads, exports and imports
// back (the import used to refuse it under the ACME rules: no backup
// holding it was restorable). ACME domains keep those rules; a leaf whose
// names a document could not carry is refused on upload, naming cert.
func TestImportManualCertificateNames(t *testing.T) {
	names := []string{"many.export.test", "a b.export.test"}
	for i := len(names); i < 101; i++ {
		names = append(names, fmt.Sprintf("n%d.export.test", i))
	}
	p := issue(t, nil, time.Now().Add(12*time.Hour), names...)

	g := testgw.Start(t, nil)
	g.Must("POST", "/api/v1/certificates", map[string]any{"cert": p.cert, "key": p.key})
	doc := g.Must("GET", "/api/v1/export?include_secrets=true", nil)
	st, b := g.Do("POST", "/api/v1/import", doc)
	if st != 200 {
		t.Fatalf("import of an export holding the certificate: %d %s", st, b)
	}
	st, b = g.Do("GET", "/api/v1/certificates", nil)
	var got []map[string]any
	if st != 200 || json.Unmarshal(b, &got) != nil || len(got) != 1 || len(got[0]["domains"].([]any)) != 101 ||
		got[0]["domains"].([]any)[1] != "a b.export.test" {
		t.Fatalf("after the import: %d %s", st, b)
	}

	// ACME domains: host names, 1..100.
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"a b.export.test"}}, "domains[0]")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"ok.export.test\r\n"}}, "domains[0]")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": names}, "domains", "at most 100")

	// Leaves whose names an export document could not carry.
	for len(names) <= 1000 {
		names = append(names, fmt.Sprintf("n%d.export.test", len(names)))
	}
	big := issue(t, nil, time.Now().Add(12*time.Hour), names...)
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": big.cert, "key": big.key}, "cert", "at most 1000")
	ctl := issue(t, nil, time.Now().Add(12*time.Hour), "ctl.export.test", "bad\x01.export.test")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": ctl.cert, "key": ctl.key}, "cert", "control characters")
}
