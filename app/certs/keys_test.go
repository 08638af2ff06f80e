package certs_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/certtest"
)

// leafWithKey is a PEM certificate for name whose public key is pub,
// signed by ca (pub need not be a working key: the rules look at the
// leaf's key before the pair is matched).
func leafWithKey(t *testing.T, ca *certtest.Cert, pub crypto.PublicKey, name string) string {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, pub, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// rsaModulus is an RSA public key of bits bits (not a product of two
// primes: only its size matters here).
func rsaModulus(bits int) *rsa.PublicKey {
	n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
	return &rsa.PublicKey{N: n.Or(n, big.NewInt(1)), E: 65537}
}

// rsa512 is a working 512-bit RSA key, made from its primes
// (rsa.GenerateKey refuses sizes under 1024 bits).
func rsa512(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	for {
		p, err := rand.Prime(rand.Reader, 256)
		if err != nil {
			t.Fatal(err)
		}
		q, err := rand.Prime(rand.Reader, 256)
		if err != nil {
			t.Fatal(err)
		}
		n := new(big.Int).Mul(p, q)
		phi := new(big.Int).Mul(new(big.Int).Sub(p, big.NewInt(1)), new(big.Int).Sub(q, big.NewInt(1)))
		d := new(big.Int).ModInverse(big.NewInt(65537), phi)
		if p.Cmp(q) == 0 || n.BitLen() != 512 || d == nil {
			continue
		}
		k := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: n, E: 65537}, D: d, Primes: []*big.Int{p, q}}
		k.Precompute()
		return k
	}
}

// TestUnusableCertificateKeysRefused: an uploaded leaf whose key TLS
// cannot serve is 400 naming cert; it used to be stored active while every
// handshake for its names failed (RSA 512, P-224) or cost the server an
// RSA private-key operation on a key clients refuse (over 8192 bits).
func TestUnusableCertificateKeysRefused(t *testing.T) {
	ca := testCA(t)
	other := certtest.Issue(t, certtest.Options{PKCS8: true}, "other.test")
	g := testgw.Start(t, nil)

	small := rsa512(t)
	smallKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}))
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": leafWithKey(t, ca, &small.PublicKey, "r512.test"), "key": smallKey}, "cert", "512 bits")
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": leafWithKey(t, ca, rsaModulus(16384), "r16k.test"), "key": other.KeyPEM}, "cert", "16384 bits")

	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(p224)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"cert": leafWithKey(t, ca, &p224.PublicKey, "p224.test"), "key": keyPEM}, "cert", "P-224")

	// What TLS serves is still accepted (certtest's leaves are P-256).
	ok := issue(t, ca, time.Now().Add(time.Hour), "ok.test")
	g.Must("POST", "/api/v1/certificates", map[string]any{"cert": ok.cert, "key": ok.key})
	if n := len(g.List("/api/v1/certificates")); n != 1 {
		t.Fatalf("%d certificates stored, want 1", n)
	}
}

// TestACMEDomainOnce: a name another ACME certificate has is 400 naming
// domains, on create and in an import. It used to be a 400 about Caddy's
// automation policies; and with dns-01 (left out of the configuration
// while no Cloudflare token is set) the duplicate was stored, and setting
// the token then failed.
func TestACMEDomainOnce(t *testing.T) {
	g := testgw.Start(t, nil)
	g.Must("PUT", "/api/v1/acme/cloudflare-token", map[string]any{"token": "t"})
	g.Must("POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"dup.example.com"}, "challenge": "dns-01"})
	g.Must("DELETE", "/api/v1/acme/cloudflare-token", nil)
	g.WantError(400, "POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"other.example.com", "DUP.example.com."}}, "domains", "dup.example.com", "already managed")
	g.Must("PUT", "/api/v1/acme/cloudflare-token", map[string]any{"token": "t"})

	// An import holding the name twice.
	doc := g.Must("GET", "/api/v1/export?include_secrets=true", nil)
	list := doc["certificates"].([]any)
	doc["certificates"] = append(list, list[0])
	g.WantError(400, "POST", "/api/v1/import", doc, "certificates[1]", "domains", "already managed")
	if n := len(g.List("/api/v1/certificates")); n != 1 {
		t.Fatalf("%d certificates after the refused import, want 1", n)
	}
}
