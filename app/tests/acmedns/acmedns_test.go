// Package acmedns tests the gateway's ACME path against a real
// ACME CA (Pebble) running in the test on 127.0.0.1: http-01, external account
// binding (a CA that requires it) and DNS-01 through the gateway's
// Cloudflare provider, pointed at a fake Cloudflare API, with a small DNS
// server answering certmagic's SOA lookups. Its own package (own process):
// Pebble's "always valid" switch and Caddy's storage folder are process
// environment.
package acmedns

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/caddy-gateway/gateway/app/internal/pebbletest"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

func TestMain(m *testing.M) {
	dir, _ := os.MkdirTemp("", "gateway-acmedns")
	os.Setenv("XDG_DATA_HOME", dir)
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pebble starts an ACME CA that accepts every challenge; with
// requireEAB, the EAB key (keyID, base64url hmac) is the only one it
// accepts.
func pebble(t *testing.T, requireEAB bool, keyID, hmac string) (directory, rootsFile string) {
	opt := pebbletest.Options{}
	if requireEAB {
		opt.EABKeyID, opt.EABHMAC = keyID, hmac
	}
	c := pebbletest.Start(t, opt)
	return c.Directory, c.RootsFile
}

// waitActive polls the certificate list until certificate id is active.
func waitActive(t *testing.T, g *testgw.Gateway, id int64) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var list []map[string]any
		g.JSON("GET", "/api/v1/certificates", nil, &list)
		for _, c := range list {
			if testgw.ID(c) == id && c["status"] == "active" {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("certificate %d not issued: %v", id, list)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func served(t *testing.T, addr, sni string) []string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS to the gateway: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].DNSNames
}

func TestEABIssuance(t *testing.T) {
	hmac := base64.RawURLEncoding.EncodeToString([]byte("a-very-secret-hmac-key-32-bytes!"))
	directory, roots := pebble(t, true, "kid-1", hmac)
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"acme_trusted_roots_pem_files": []string{roots}}})
	q := "/api/v1/acme/eab?directory_url=" + url.QueryEscape(directory+"/")

	// Not configured yet; the directory comes back normalized.
	st := g.Must("GET", q, nil)
	if st["directory_url"] != directory || st["configured"] != false || st["account_registered"] != false || len(st) != 3 {
		t.Fatalf("EAB status before: %v", st)
	}
	g.WantError(400, "GET", "/api/v1/acme/eab", nil, "directory_url")
	g.WantError(400, "PUT", "/api/v1/acme/eab", map[string]any{"directory_url": directory, "key_id": "kid-1", "hmac_key": "not base64!"}, "hmac_key")
	g.WantError(400, "PUT", "/api/v1/acme/eab", map[string]any{"directory_url": directory, "hmac_key": hmac}, "key_id")
	if got := g.Must("PUT", "/api/v1/acme/eab", map[string]any{"directory_url": directory, "key_id": "kid-1", "hmac_key": hmac}); got["configured"] != true || len(got) != 1 {
		t.Fatalf("PUT eab: %v", got)
	}
	// Another directory is not configured by it.
	if st := g.Must("GET", "/api/v1/acme/eab?directory_url=letsencrypt", nil); st["configured"] != false || st["directory_url"] != "https://acme-v02.api.letsencrypt.org/directory" {
		t.Fatalf("other directory: %v", st)
	}
	st = g.Must("GET", q, nil)
	if st["configured"] != true || st["account_registered"] != false {
		t.Fatalf("EAB status configured: %v", st)
	}
	_, body := g.Do("GET", q, nil)
	if strings.Contains(string(body), hmac) || strings.Contains(string(body), "kid-1") {
		t.Fatalf("EAB answer shows credentials: %s", body)
	}

	httpsAddr := testgw.FreeAddr(t)
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": httpsAddr,
		"https_enabled": true, "acme_directory_url": directory, "acme_email": "ops@eab.test"})
	cert := g.Must("POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"eab.test"}})
	waitActive(t, g, testgw.ID(cert))
	if names := served(t, httpsAddr, "eab.test"); len(names) != 1 || names[0] != "eab.test" {
		t.Fatalf("served: %v", names)
	}
	st = g.Must("GET", q, nil)
	if st["configured"] != true || st["account_registered"] != true {
		t.Fatalf("EAB status after issuance: %v", st)
	}
	// DELETE removes the credentials, not the account.
	if got := g.Must("DELETE", q, nil); got["configured"] != false {
		t.Fatalf("DELETE eab: %v", got)
	}
	st = g.Must("GET", q, nil)
	if st["configured"] != false || st["account_registered"] != true {
		t.Fatalf("EAB status after delete: %v", st)
	}
}

// fakeCloudflare is the part of Cloudflare's v4 API the provider uses.
type fakeCloudflare struct {
	token   string
	mu      sync.Mutex
	nextID  int
	records map[string]map[string]any // id → record
	created []map[string]any
	deleted []string
}

func (f *fakeCloudflare) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, result any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"success": status < 300, "errors": []any{}, "result": result})
	}
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		w.WriteHeader(403)
		_, _ = w.Write([]byte(`{"success":false,"errors":[{"code":9109,"message":"Invalid access token"}]}`))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == "GET" && len(parts) == 1 && parts[0] == "zones":
		if r.URL.Query().Get("name") == "example.test" {
			reply(200, []any{map[string]any{"id": "zone-1", "name": "example.test"}})
		} else {
			reply(200, []any{})
		}
	case len(parts) >= 3 && parts[0] == "zones" && parts[1] == "zone-1" && parts[2] == "dns_records":
		switch {
		case r.Method == "POST" && len(parts) == 3:
			var rec map[string]any
			_ = json.NewDecoder(r.Body).Decode(&rec)
			f.nextID++
			rec["id"] = "rec-" + strconv.Itoa(f.nextID)
			f.records[rec["id"].(string)] = rec
			f.created = append(f.created, rec)
			reply(200, rec)
		case r.Method == "GET" && len(parts) == 3:
			out := []any{}
			for _, rec := range f.records {
				if rec["name"] == r.URL.Query().Get("name") && (r.URL.Query().Get("type") == "" || rec["type"] == r.URL.Query().Get("type")) {
					out = append(out, rec)
				}
			}
			reply(200, out)
		case r.Method == "DELETE" && len(parts) == 4:
			delete(f.records, parts[3])
			f.deleted = append(f.deleted, parts[3])
			reply(200, map[string]any{"id": parts[3]})
		default:
			reply(404, nil)
		}
	default:
		reply(404, nil)
	}
}

// soaServer answers SOA queries for the zone example.test (NXDOMAIN for
// names below it), which is all certmagic asks with propagation checks off.
func soaServer(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
			Ns: "ns.example.test.", Mbox: "hostmaster.example.test.", Serial: 1, Refresh: 60, Retry: 60, Expire: 60, Minttl: 60}
		q := req.Question[0]
		switch {
		case strings.EqualFold(q.Name, "example.test.") && q.Qtype == dns.TypeSOA:
			m.Answer = append(m.Answer, soa)
		case strings.HasSuffix(strings.ToLower(q.Name), ".example.test."):
			m.Rcode = dns.RcodeNameError
			m.Ns = append(m.Ns, soa)
		default:
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

func TestDNS01WildcardThroughCloudflare(t *testing.T) {
	directory, roots := pebble(t, false, "", "")
	cf := &fakeCloudflare{token: "cf-secret-token", records: map[string]map[string]any{}}
	cfSrv := httptest.NewServer(cf)
	t.Cleanup(cfSrv.Close)
	resolver := soaServer(t)
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{
		"acme_trusted_roots_pem_files": []string{roots},
		"acme_dns_resolvers":           []string{resolver},
		"cloudflare_api_url":           cfSrv.URL,
	}})
	httpsAddr := testgw.FreeAddr(t)
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": httpsAddr,
		"https_enabled": true, "acme_directory_url": directory, "acme_email": "ops@example.test"})

	// Wildcards need dns-01; dns-01 needs the token.
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"*.example.test"}}, "dns-01")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"*.example.test"}, "challenge": "dns-01"}, "token")
	if got := g.Must("GET", "/api/v1/acme/cloudflare-token", nil); got["configured"] != false || len(got) != 1 {
		t.Fatalf("token before: %v", got)
	}
	g.WantError(400, "PUT", "/api/v1/acme/cloudflare-token", map[string]any{"token": ""}, "token")
	if got := g.Must("PUT", "/api/v1/acme/cloudflare-token", map[string]any{"token": cf.token}); got["configured"] != true || len(got) != 1 {
		t.Fatalf("PUT token: %v", got)
	}
	_, body := g.Do("GET", "/api/v1/acme/cloudflare-token", nil)
	if !strings.Contains(string(body), `"configured":true`) || strings.Contains(string(body), cf.token) {
		t.Fatalf("GET token: %s", body)
	}

	cert := g.Must("POST", "/api/v1/certificates", map[string]any{"acme": true, "challenge": "dns-01",
		"domains": []string{"*.example.test", "example.test"}})
	issued := waitActive(t, g, testgw.ID(cert))
	if issued["fingerprint_sha256"] == nil {
		t.Fatalf("issued: %v", issued)
	}
	// Caddy manages each name on its own: one certificate per name.
	if names := served(t, httpsAddr, "api.example.test"); len(names) != 1 || names[0] != "*.example.test" {
		t.Fatalf("served for api.example.test: %v", names)
	}
	if names := served(t, httpsAddr, "example.test"); len(names) != 1 || names[0] != "example.test" {
		t.Fatalf("served for example.test: %v", names)
	}
	// A handshake without a server name has no name to pick a certificate
	// by: it gets none of them (Go sends no SNI to an IP address).
	if conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{InsecureSkipVerify: true}); err == nil {
		names := conn.ConnectionState().PeerCertificates[0].DNSNames
		conn.Close()
		t.Fatalf("a handshake without a server name got %v", names)
	}
	// A forced renewal of the wildcard is served at once to hosts under it.
	if got := g.Must("POST", "/api/v1/certificates/"+strconv.FormatInt(testgw.ID(cert), 10)+"/renew", nil); got["queued"] != true {
		t.Fatalf("renew: %v", got)
	}
	renewed := waitCertificate(t, g, testgw.ID(cert), "not renewed", func(r map[string]any) bool {
		return r["status"] == "active" && r["fingerprint_sha256"] != issued["fingerprint_sha256"]
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		leaf := servedLeaf(t, httpsAddr, "api.example.test")
		if fingerprint(leaf) == renewed["fingerprint_sha256"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed wildcard %v is not served: still %s", renewed["fingerprint_sha256"], fingerprint(leaf))
		}
	}
	cf.mu.Lock()
	created, deleted := len(cf.created), len(cf.deleted)
	var first map[string]any
	if created > 0 {
		first = cf.created[0]
	}
	cf.mu.Unlock()
	if created < 1 || first["type"] != "TXT" || first["name"] != "_acme-challenge.example.test" || first["content"] == "" {
		t.Fatalf("TXT records created at Cloudflare: %d, first %v", created, first)
	}
	// The challenge records are cleaned up (asynchronously after issuance).
	deadline := time.Now().Add(10 * time.Second)
	for deleted < created && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		cf.mu.Lock()
		deleted = len(cf.deleted)
		cf.mu.Unlock()
	}
	if deleted < created {
		t.Fatalf("created %d TXT records, deleted %d", created, deleted)
	}
	if got := g.Must("DELETE", "/api/v1/acme/cloudflare-token", nil); got["configured"] != false {
		t.Fatalf("DELETE token: %v", got)
	}
	if got := g.Must("GET", "/api/v1/acme/cloudflare-token", nil); got["configured"] != false {
		t.Fatalf("token after delete: %v", got)
	}
}
