// Package pebbletest runs Pebble, Let's Encrypt's test ACME CA, inside a
// test process on 127.0.0.1: for the gateway's ACME tests (single node in
// app/tests/acmedns, three nodes in app/tests/cluster), which are
// its tests.
package pebbletest

import (
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// Options of a CA.
type Options struct {
	// Validate makes the CA check challenges for real: every name resolves
	// to 127.0.0.1 (a DNS server of the test) and HTTP-01 / TLS-ALPN-01 are
	// checked on HTTPPort / TLSPort. Without it every challenge is valid.
	Validate          bool
	HTTPPort, TLSPort int
	// EABKeyID and EABHMAC (base64url), when set, are the only external
	// account key the CA accepts, and it requires one.
	EABKeyID, EABHMAC string
}

// CA is a running Pebble.
type CA struct {
	// Directory is the ACME directory URL.
	Directory string
	// RootsFile is a PEM file with the certificate of the CA's HTTPS
	// endpoint (for acme_trusted_roots_pem_files or SSL_CERT_FILE).
	RootsFile string

	orders atomic.Int64
}

// Orders is how many orders the CA created. Requests it refused do not
// count: Pebble rejects a share of nonces at random (badNonce) and the
// ACME client sends the same order again.
func (c *CA) Orders() int64 { return c.orders.Load() }

// Start runs a CA until the test ends. Pebble reads its switches from the
// environment, so tests that start one must not run in parallel.
func Start(t *testing.T, opt Options) *CA {
	always := "1"
	var resolver string
	if opt.Validate {
		always, resolver = "", loopbackDNS(t)
	}
	t.Setenv("PEBBLE_VA_ALWAYS_VALID", always)
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	logger := log.New(io.Discard, "", 0)
	store := db.NewMemoryStore()
	requireEAB := opt.EABKeyID != ""
	if requireEAB {
		if err := store.AddExternalAccountKeyByID(opt.EABKeyID, opt.EABHMAC); err != nil {
			t.Fatal(err)
		}
	}
	httpPort, tlsPort := opt.HTTPPort, opt.TLSPort
	if httpPort == 0 {
		httpPort = 80
	}
	if tlsPort == 0 {
		tlsPort = 443
	}
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "test"}})
	validator := va.New(logger, httpPort, tlsPort, false, resolver, store)
	frontEnd := wfe.New(logger, store, validator, authority, nil, false, requireEAB, 0, 0)
	front := frontEnd.Handler()
	c := new(CA)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/order-plz" { // Pebble's newOrder
			rec := &statusRecorder{ResponseWriter: w}
			front.ServeHTTP(rec, r)
			if rec.status == http.StatusCreated {
				c.orders.Add(1)
			}
			return
		}
		front.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.Directory = srv.URL + "/dir"
	c.RootsFile = filepath.Join(t.TempDir(), "pebble-https.pem")
	if err := os.WriteFile(c.RootsFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// statusRecorder remembers the status code of an answer.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// loopbackDNS answers every A query with 127.0.0.1, over TCP as Pebble's
// validator asks: every name the CA validates is on this machine.
func loopbackDNS(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Net: "tcp", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if q := req.Question[0]; q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.IPv4(127, 0, 0, 1)})
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}
