// Package certtest makes self-signed TLS certificates for tests: a
// certificate for hosts (names and IP addresses) with its key, in PEM, and
// a pool that trusts it; or, with Issue, one for a given period, signed by
// a test CA, or a CA itself. Its tests are the tests that use it
// (app/tests, app/certs, modules/plugins).
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// SelfSigned is a P-256 server certificate for hosts (the first is its
// common name; IP addresses go into its IP SANs), valid from an hour ago
// for a day, its key, and a pool that trusts it.
func SelfSigned(t testing.TB, hosts ...string) (certPEM, keyPEM string, pool *x509.CertPool) {
	t.Helper()
	c := Issue(t, Options{}, hosts...)
	return c.CertPEM, c.KeyPEM, c.Pool()
}

// Options are what Issue makes; the zero value is SelfSigned's
// certificate.
type Options struct {
	// NotBefore and NotAfter bound the validity; defaults: an hour ago,
	// a day from now.
	NotBefore, NotAfter time.Time
	// CA signs the certificate; nil: self-signed.
	CA *Cert
	// IsCA makes a CA certificate (signs others; no SANs) instead of a
	// server certificate.
	IsCA bool
	// PKCS8 writes the key as PKCS #8 ("PRIVATE KEY") instead of SEC 1
	// ("EC PRIVATE KEY").
	PKCS8 bool
}

// Cert is a certificate made by Issue.
type Cert struct {
	Leaf            *x509.Certificate
	Key             *ecdsa.PrivateKey
	CertPEM, KeyPEM string
}

// Pool is a certificate pool that trusts c.
func (c *Cert) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(c.Leaf)
	return pool
}

// Issue makes a P-256 certificate for hosts (the first is its common
// name; IP addresses go into its IP SANs) with a random serial number.
func Issue(t testing.TB, o Options, hosts ...string) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if o.IsCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage, tmpl.ExtKeyUsage = x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature, nil
	} else {
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	parent, signer := tmpl, key
	if o.CA != nil {
		parent, signer = o.CA.Leaf, o.CA.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	keyBlock := &pem.Block{Type: "EC PRIVATE KEY"}
	if o.PKCS8 {
		keyBlock.Type = "PRIVATE KEY"
		keyBlock.Bytes, err = x509.MarshalPKCS8PrivateKey(key)
	} else {
		keyBlock.Bytes, err = x509.MarshalECPrivateKey(key)
	}
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{Leaf: leaf, Key: key,
		CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		KeyPEM:  string(pem.EncodeToMemory(keyBlock))}
}
