package certs

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/certtest"
	"github.com/caddy-gateway/gateway/modules/certevents"
)

// testLeaf is a certificate for name valid for 90 days from notBefore.
func testLeaf(t *testing.T, name string, notBefore time.Time) *x509.Certificate {
	return certtest.Issue(t, certtest.Options{NotBefore: notBefore, NotAfter: notBefore.Add(90 * 24 * time.Hour)}, name).Leaf
}

// update: what each event does to a certificate row.
func TestUpdateFromEvents(t *testing.T) {
	now := time.Now().UTC()
	pending := &Row{ACME: true, Domains: []string{"a.example.com"}, Status: "pending"}
	failed := update(pending, certevents.Event{Name: "a.example.com", Kind: certevents.Failed, Error: "connection refused"}, now)
	if failed["status"] != "failed" || failed["last_error"] != "connection refused" {
		t.Fatalf("failed order of a pending certificate: %v", failed)
	}
	pending.Status, pending.LastError = "failed", new(string)
	*pending.LastError = "connection refused"
	if again := update(pending, certevents.Event{Name: "a.example.com", Kind: certevents.Failed, Error: "connection refused"}, now); again != nil {
		t.Fatalf("the same failure again writes %v", again)
	}

	first := testLeaf(t, "a.example.com", now.Add(-time.Hour).Truncate(time.Second))
	got := update(pending, certevents.Event{Name: "a.example.com", Kind: certevents.Obtained, Leaf: first}, now)
	if got["status"] != "active" || got["issuer"] != "a.example.com" || got["last_error"] != nil ||
		!got["not_before"].(time.Time).Equal(first.NotBefore) || !got["not_after"].(time.Time).Equal(first.NotAfter) || got["fingerprint"] == "" {
		t.Fatalf("obtained: %v", got)
	}
	nb, na := first.NotBefore.UTC(), first.NotAfter.UTC()
	active := &Row{ACME: true, Domains: []string{"a.example.com"}, Status: "active",
		NotBefore: &nb, NotAfter: &na, Fingerprint: got["fingerprint"].(string)}
	if same := update(active, certevents.Event{Name: "a.example.com", Kind: certevents.Loaded, Leaf: first}, now); same != nil {
		t.Fatalf("another node loading the same certificate writes %v", same)
	}
	older := testLeaf(t, "a.example.com", now.Add(-48*time.Hour).Truncate(time.Second))
	if stale := update(active, certevents.Event{Name: "a.example.com", Kind: certevents.Loaded, Leaf: older}, now); stale != nil {
		t.Fatalf("an older certificate overwrites the recorded one: %v", stale)
	}
	renewFailed := update(active, certevents.Event{Name: "a.example.com", Kind: certevents.Failed, Renewal: true, Error: "rate limited"}, now)
	if renewFailed["status"] != "active" || renewFailed["last_error"] != "rate limited" {
		t.Fatalf("failed renewal of an issued certificate: %v", renewFailed)
	}

	// Several names: the failing one is named; active only once every
	// name has a certificate.
	two := &Row{ACME: true, Domains: []string{"a.example.com", "b.example.com"}, Status: "pending"}
	if f := update(two, certevents.Event{Name: "b.example.com", Kind: certevents.Failed, Error: "refused"}, now); f["last_error"] != "b.example.com: refused" {
		t.Fatalf("failure of one of two names: %v", f)
	}
	if g := update(two, certevents.Event{Name: "a.example.com", Kind: certevents.Obtained, Leaf: first}, now); g != nil {
		t.Fatalf("one of two names issued makes the certificate %v", g)
	}
}
