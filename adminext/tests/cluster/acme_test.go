package cluster

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

// loopbackDNS answers every A query with 127.0.0.1 (over TCP, as Pebble's
// validator asks): every name the CA validates is on this machine.
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

// challengeRouter is where the CA's validator connects for one challenge
// type: it forwards each connection to a node that did NOT order the
// certificate (the orderer is the node whose log says it is obtaining one),
// so the answer must come from the shared storage.
type challengeRouter struct {
	t     *testing.T
	ln    net.Listener
	nodes []*node
	addr  func(*node) string
	name  string // the name being validated through this router

	mu      sync.Mutex
	reached map[string][2]string // name → orderer, answering node
}

func newChallengeRouter(t *testing.T, name string, addr func(*node) string) *challengeRouter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &challengeRouter{t: t, ln: ln, name: name, addr: addr, reached: map[string][2]string{}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.forward(c)
		}
	}()
	return r
}

func (r *challengeRouter) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// orderer is the node that logged obtaining the certificate of r.name
// (waiting up to 5 s for its log).
func (r *challengeRouter) orderer() *node {
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, n := range r.nodes {
			for _, line := range strings.Split(n.logs.String(), "\n") {
				var entry struct {
					Msg        string `json:"msg"`
					Identifier string `json:"identifier"`
				}
				if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "obtaining certificate" && entry.Identifier == r.name {
					return n
				}
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *challengeRouter) forward(c net.Conn) {
	defer c.Close()
	orderer, name := r.orderer(), r.name
	if orderer == nil {
		r.t.Errorf("the CA validates, but no node logged obtaining a certificate")
		return
	}
	var target *node
	for i, n := range r.nodes {
		if n == orderer {
			target = r.nodes[(i+1)%len(r.nodes)]
		}
	}
	up, err := net.Dial("tcp", r.addr(target))
	if err != nil {
		r.t.Errorf("forwarding the CA's validation to %s: %v", target.name, err)
		return
	}
	defer up.Close()
	r.mu.Lock()
	if _, ok := r.reached[name]; !ok {
		r.reached[name] = [2]string{orderer.name, target.name}
	}
	r.mu.Unlock()
	go func() { _, _ = io.Copy(up, c) }()
	_, _ = io.Copy(c, up)
}

// clusterPebble starts an ACME CA validating through the routers; it
// counts the orders placed with it.
func clusterPebble(t *testing.T, httpPort, tlsPort int, orders *atomic.Int64) (directory, rootsFile string) {
	t.Setenv("PEBBLE_VA_ALWAYS_VALID", "")
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	logger := log.New(io.Discard, "", 0)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "test"}})
	validator := va.New(logger, httpPort, tlsPort, false, loopbackDNS(t), store)
	frontEnd := wfe.New(logger, store, validator, authority, nil, false, false, 0, 0)
	front := frontEnd.Handler()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && req.URL.Path == "/order-plz" {
			orders.Add(1)
		}
		front.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	rootsFile = filepath.Join(t.TempDir(), "pebble-https.pem")
	if err := os.WriteFile(rootsFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL + "/dir", rootsFile
}

func servedFingerprint(t *testing.T, addr, sni string) (string, []string) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return "", nil
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	sum := sha256.Sum256(leaf.Raw)
	return hex.EncodeToString(sum[:]), leaf.DNSNames
}

// TestClusterACME: three nodes, one CA. Each certificate is ordered once
// (the CA sees one order per certificate), by one node, and served by SNI
// on all three; the CA's HTTP-01 and TLS-ALPN-01 validations are answered
// by a node other than the one that ordered, from the shared storage.
func TestClusterACME(t *testing.T) {
	httpRouter := newChallengeRouter(t, "web.cluster.test", func(n *node) string { return n.http })
	tlsRouter := newChallengeRouter(t, "alpn.cluster.test", func(n *node) string { return n.https })
	var orders atomic.Int64
	directory, roots := clusterPebble(t, httpRouter.port(), tlsRouter.port(), &orders)
	// The nodes trust the CA's HTTPS endpoint through the process's
	// system roots (Go reads SSL_CERT_FILE).
	_, nodes := threeNodes(t, "SSL_CERT_FILE="+roots)
	httpRouter.nodes, tlsRouter.nodes = nodes, nodes
	n1 := nodes[0]
	n1.must("PUT", "/api/v1/settings", map[string]any{"http_listen": testgw.FreeAddr(t), "https_listen": testgw.FreeAddr(t),
		"https_enabled": true, "acme_directory_url": directory, "acme_email": "ops@cluster.test"})
	// One certificate after the other: each router knows which name the
	// CA is validating.
	certs := map[string]int64{}
	for _, c := range []struct{ name, challenge string }{{"web.cluster.test", "http-01"}, {"alpn.cluster.test", "tls-alpn-01"}} {
		created := n1.must("POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{c.name}, "challenge": c.challenge})
		certs[c.name] = testgw.ID(created)
		waitIssuedEverywhere(t, nodes, testgw.ID(created), c.name)
	}
	if got := orders.Load(); got != int64(len(certs)) {
		t.Fatalf("the CA saw %d orders for %d certificates", got, len(certs))
	}
	for router, name := range map[*challengeRouter]string{httpRouter: "web.cluster.test", tlsRouter: "alpn.cluster.test"} {
		router.mu.Lock()
		got, ok := router.reached[name]
		router.mu.Unlock()
		if !ok || got[0] == got[1] {
			t.Fatalf("validation of %s: ordered by / answered by %v (reached: %v)", name, got, ok)
		}
		t.Logf("%s: ordered by %s, validated through %s", name, got[0], got[1])
	}
	obtained := 0
	for _, n := range nodes {
		obtained += strings.Count(n.logs.String(), `"certificate obtained successfully"`)
	}
	if obtained != len(certs) {
		t.Fatalf("%d certificates obtained over the nodes, want %d", obtained, len(certs))
	}
}

// waitIssuedEverywhere waits until certificate id is active on every
// node's API and every node serves that very certificate for name.
func waitIssuedEverywhere(t *testing.T, nodes []*node, id int64, name string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for _, n := range nodes {
		for {
			var list []map[string]any
			st, body := n.try("GET", "/api/v1/certificates", nil)
			_ = json.Unmarshal(body, &list)
			var c map[string]any
			for _, x := range list {
				if testgw.ID(x) == id {
					c = x
				}
			}
			fp, names := servedFingerprint(t, n.https, name)
			if st == 200 && c != nil && c["status"] == "active" && fp != "" && fp == c["fingerprint_sha256"] {
				if len(names) != 1 || names[0] != name {
					t.Fatalf("%s serves %v for %s", n.name, names, name)
				}
				break
			}
			if c != nil && c["status"] == "failed" {
				t.Fatalf("%s failed: %v", name, c)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s on %s: certificate %v, served %q", name, n.name, c, fp)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
