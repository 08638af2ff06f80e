package gwtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

func cached(t *testing.T, name string, notBefore time.Time, serial int64) certmagic.Certificate {
	return cachedOn(t, elliptic.P256(), name, notBefore, serial)
}

func cachedOn(t *testing.T, curve elliptic.Curve, name string, notBefore time.Time, serial int64) certmagic.Certificate {
	key, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), DNSNames: []string{name},
		NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return certmagic.Certificate{Certificate: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Names: []string{name}}
}

// NewestFirst serves the valid certificate issued last for the server name.
func TestNewestFirst(t *testing.T) {
	now := time.Now()
	old := cached(t, "a.example.com", now.Add(-2*time.Hour), 1)
	renewed := cached(t, "a.example.com", now.Add(-time.Hour), 2)
	future := cached(t, "a.example.com", now.Add(time.Hour), 3)
	other := cached(t, "b.example.com", now, 4)
	// issued after the renewed one, but on a curve the client does not take
	unsupported := cachedOn(t, elliptic.P384(), "a.example.com", now.Add(-30*time.Minute), 5)
	hello := &tls.ClientHelloInfo{ServerName: "a.example.com", SupportedVersions: []uint16{tls.VersionTLS13},
		SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256}}
	got, err := NewestFirst{}.SelectCertificate(hello, []certmagic.Certificate{old, renewed, future, other, unsupported})
	if err != nil || got.Leaf.SerialNumber.Int64() != 2 {
		t.Fatalf("selected %v, %v; want the renewed certificate", got.Leaf, err)
	}
	// Only unsupported certificates cover the name: none is selected.
	if _, err := (NewestFirst{}).SelectCertificate(hello, []certmagic.Certificate{unsupported, other}); err == nil {
		t.Fatal("a certificate the client does not support was selected")
	}
	// certmagic offers every cached certificate when none is indexed under
	// the name: none covering it is an error.
	if _, err := (NewestFirst{}).SelectCertificate(&tls.ClientHelloInfo{ServerName: "c.example.com"}, []certmagic.Certificate{other}); err == nil {
		t.Fatal("a certificate for another name was selected")
	}
}
