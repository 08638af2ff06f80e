package gwtls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
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

// newest picks the valid certificate issued last for the server name.
func TestNewestChoice(t *testing.T) {
	now := time.Now()
	old := cached(t, "a.example.com", now.Add(-2*time.Hour), 1)
	renewed := cached(t, "a.example.com", now.Add(-time.Hour), 2)
	future := cached(t, "a.example.com", now.Add(time.Hour), 3)
	other := cached(t, "b.example.com", now, 4)
	// issued after the renewed one, but on a curve the client does not take
	unsupported := cachedOn(t, elliptic.P384(), "a.example.com", now.Add(-30*time.Minute), 5)
	got, ok := newest(hello("a.example.com"), "a.example.com", []certmagic.Certificate{old, renewed, future, other, unsupported})
	if !ok || got.Leaf.SerialNumber.Int64() != 2 {
		t.Fatalf("selected %v; want the renewed certificate", got.Leaf)
	}
	// Only unsupported certificates cover the name: none is selected.
	if _, ok := newest(hello("a.example.com"), "a.example.com", []certmagic.Certificate{unsupported, other}); ok {
		t.Fatal("a certificate the client does not support was selected")
	}
	if _, ok := newest(hello("c.example.com"), "c.example.com", []certmagic.Certificate{other}); ok {
		t.Fatal("a certificate for another name was selected")
	}
	// An exact certificate wins over a wildcard issued after it; a
	// wildcard is chosen only when no exact certificate the client
	// supports is cached.
	wildcard := cached(t, "*.example.com", now.Add(-time.Minute), 6)
	if got, ok := newest(hello("a.example.com"), "a.example.com", []certmagic.Certificate{wildcard, old, renewed}); !ok || got.Leaf.SerialNumber.Int64() != 2 {
		t.Fatalf("selected %v; want the exact certificate, not the newer wildcard", got.Leaf)
	}
	if got, ok := newest(hello("a.example.com"), "a.example.com", []certmagic.Certificate{unsupported, wildcard}); !ok || got.Leaf.SerialNumber.Int64() != 6 {
		t.Fatalf("selected %v; want the wildcard (the only exact one is not supported)", got.Leaf)
	}
	if got, ok := newest(hello("c.example.com"), "c.example.com", []certmagic.Certificate{other, wildcard}); !ok || got.Leaf.SerialNumber.Int64() != 6 {
		t.Fatalf("selected %v; want the wildcard", got.Leaf)
	}
}

// A certificate renewed within the second its predecessor was issued ties
// with it on NotBefore and NotAfter (one-second resolution): the one
// issued last (Issued, from certmagic's cert_obtained event) is newest,
// whatever order the cache lists them in.
func TestNewestOnTiedValidity(t *testing.T) {
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	first := cached(t, "t.example.com", at, 1)
	second := cached(t, "t.example.com", at, 2)
	Issued("t.example.com", first.Leaf)
	Issued("T.example.com", second.Leaf)
	for _, choices := range [][]certmagic.Certificate{{first, second}, {second, first}} {
		if got, ok := newest(hello("t.example.com"), "t.example.com", choices); !ok || got.Leaf.SerialNumber.Int64() != 2 {
			t.Fatalf("selected %v; want the one issued last", got.Leaf)
		}
	}
	Issued("t.example.com", first.Leaf)
	for _, choices := range [][]certmagic.Certificate{{first, second}, {second, first}} {
		if got, ok := newest(hello("t.example.com"), "t.example.com", choices); !ok || got.Leaf.SerialNumber.Int64() != 1 {
			t.Fatalf("selected %v; want the one issued last", got.Leaf)
		}
	}
	if Later(&first, &first) {
		t.Fatal("a certificate is later than itself")
	}
}

func hello(name string) *tls.ClientHelloInfo {
	conn, _ := net.Pipe() // certmagic logs the handshake's remote address
	return &tls.ClientHelloInfo{ServerName: name, SupportedVersions: []uint16{tls.VersionTLS13},
		SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256}, Conn: conn}
}

// Newest in front of certmagic's handshake logic, on a real certmagic
// cache: a renewed certificate cached beside its predecessor is served at
// once, for an exact name and for a host under a wildcard; handshakes
// without a server name, for a name without a certificate or for a
// TLS-ALPN challenge get exactly what certmagic answers.
func TestNewestOnCertmagicCache(t *testing.T) {
	var cfg *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{Logger: zap.NewNop(), GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil }})
	t.Cleanup(cache.Stop)
	cfg = certmagic.New(cache, certmagic.Config{Storage: &certmagic.FileStorage{Path: t.TempDir()}, Logger: zap.NewNop()})
	now := time.Now()
	for _, c := range []certmagic.Certificate{
		cached(t, "*.c.example.com", now.Add(-2*time.Hour), 1),
		cached(t, "*.c.example.com", now.Add(-time.Hour), 2),
		cached(t, "a.example.com", now.Add(-2*time.Hour), 3),
		cached(t, "a.example.com", now.Add(-time.Hour), 4),
	} {
		if _, err := cfg.CacheUnmanagedTLSCertificate(context.Background(), c.Certificate, nil); err != nil {
			t.Fatal(err)
		}
	}
	get := Newest(cfg.GetCertificate, cache.AllMatchingCertificates)
	for name, serial := range map[string]int64{"x.c.example.com": 2, "A.Example.com": 4, "a.example.com.": 4} {
		c, err := get(hello(name))
		if err != nil || c.Leaf.SerialNumber.Int64() != serial {
			t.Fatalf("%s: served %v, %v; want serial %d", name, c, err, serial)
		}
	}
	// certmagic's own default serves the first one cached.
	if c, err := cfg.GetCertificate(hello("x.c.example.com")); err != nil || c.Leaf.SerialNumber.Int64() != 1 {
		t.Fatalf("certmagic alone: %v, %v", c, err)
	}
	challenge := hello("a.example.com")
	challenge.SupportedProtos = []string{"acme-tls/1"}
	for _, h := range []*tls.ClientHelloInfo{hello(""), hello("y.x.c.example.com"), hello("c.example.com"), challenge} {
		got, err := get(h)
		want, werr := cfg.GetCertificate(h)
		if (err == nil) != (werr == nil) || (err == nil && got.Leaf != want.Leaf) {
			t.Fatalf("%q %v: served %v, %v; certmagic serves %v, %v", h.ServerName, h.SupportedProtos, got, err, want, werr)
		}
	}
}
