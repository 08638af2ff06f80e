package cluster

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/pebbletest"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/tcptest"
)

// challengeRouter is where the CA's validator connects for one challenge
// type: it forwards each connection to a node that did NOT order the
// certificate (the orderer is the node whose log says it is obtaining one),
// so the answer must come from the shared storage.
type challengeRouter struct {
	t          *testing.T
	listenPort int
	addr       func(*node) string
	name       string // the name being validated through this router

	mu      sync.Mutex
	nodes   []*node              // set once the nodes run (setNodes)
	reached map[string][2]string // name → orderer, answering node
}

// setNodes hands the router the nodes. Under mu: the CA's connections
// come only after it, but through another process, which the race
// detector cannot see.
func (r *challengeRouter) setNodes(nodes []*node) {
	r.mu.Lock()
	r.nodes = nodes
	r.mu.Unlock()
}

func (r *challengeRouter) nodeList() []*node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes
}

func newChallengeRouter(t *testing.T, name string, addr func(*node) string) *challengeRouter {
	r := &challengeRouter{t: t, name: name, addr: addr, reached: map[string][2]string{}}
	_, p := testgw.HostPort(t, tcptest.Serve(t, r.forward))
	r.listenPort = p
	return r
}

func (r *challengeRouter) port() int { return r.listenPort }

// orderer is the node that logged obtaining the certificate of r.name
// (waiting up to 5 s for its log).
func (r *challengeRouter) orderer() *node {
	deadline := time.Now().Add(5 * time.Second)
	nodes := r.nodeList()
	for {
		for _, n := range nodes {
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
	nodes := r.nodeList()
	for i, n := range nodes {
		if n == orderer {
			target = nodes[(i+1)%len(nodes)]
		}
	}
	// The answering node has loaded the configuration with the
	// certificate (a node that has not yet cannot know the challenge's
	// issuer; propagation is tested elsewhere).
	for deadline := time.Now().Add(5 * time.Second); appliedVersion(target) < appliedVersion(orderer) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
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

// appliedVersion is the configuration version n serves (0 when it does
// not answer).
func appliedVersion(n *node) int64 {
	st, body := n.try("GET", "/api/v1/config", nil)
	var cfg struct {
		Version int64 `json:"version"`
	}
	if st != 200 || json.Unmarshal(body, &cfg) != nil {
		return 0
	}
	return cfg.Version
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
	acme := pebbletest.Start(t, pebbletest.Options{Validate: true, HTTPPort: httpRouter.port(), TLSPort: tlsRouter.port()})
	directory, roots := acme.Directory, acme.RootsFile
	// The nodes trust the CA's HTTPS endpoint through the process's
	// system roots (Go reads SSL_CERT_FILE).
	_, nodes := threeNodes(t, "SSL_CERT_FILE="+roots)
	httpRouter.setNodes(nodes)
	tlsRouter.setNodes(nodes)
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
	if got := acme.Orders(); got != int64(len(certs)) {
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
