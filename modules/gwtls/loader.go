// Package gwtls holds the tls app modules through which the gateway hands
// Caddy its certificates and ACME credentials by reference (package
// configref) instead of writing private keys and EAB MAC keys into Caddy's
// JSON config, where Caddy's admin endpoint would show them.
package gwtls

import (
	"crypto/tls"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/caddy-gateway/gateway/internal/configref"
)

func init() {
	caddy.RegisterModule(new(Loader))
}

// Pair is one uploaded certificate chain with its private key, in PEM, and
// the tags it is loaded with.
type Pair struct {
	CertPEM string
	KeyPEM  string
	Tags    []string
}

// Loader is the certificate loader tls.certificates.gateway: it loads the
// pairs its reference names (a []Pair the gateway compiled from its store).
type Loader struct {
	// Ref references the gateway's compiled certificate pairs.
	Ref string `json:"ref"`

	pairs []Pair
}

// CaddyModule returns the Caddy module information.
func (*Loader) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tls.certificates.gateway",
		New: func() caddy.Module { return new(Loader) },
	}
}

// Provision resolves the reference.
func (l *Loader) Provision(caddy.Context) error {
	pairs, err := configref.Get[[]Pair](l.Ref)
	if err != nil {
		return fmt.Errorf("gateway certificates: %w", err)
	}
	l.pairs = pairs
	return nil
}

// LoadCertificates implements caddytls.CertificateLoader.
func (l *Loader) LoadCertificates() ([]caddytls.Certificate, error) {
	out := make([]caddytls.Certificate, 0, len(l.pairs))
	for _, p := range l.pairs {
		cert, err := tls.X509KeyPair([]byte(p.CertPEM), []byte(p.KeyPEM))
		if err != nil {
			return nil, fmt.Errorf("gateway certificate %v: %w", p.Tags, err)
		}
		out = append(out, caddytls.Certificate{Certificate: cert, Tags: p.Tags})
	}
	return out, nil
}

// Interface guards
var (
	_ caddy.Provisioner          = (*Loader)(nil)
	_ caddytls.CertificateLoader = (*Loader)(nil)
)
