package gwtls

import (
	"crypto/tls"
	"errors"
	"time"

	"github.com/caddyserver/certmagic"
)

// NewestFirst is the certificate selection of the gateway's ACME automation
// policies: among the cached certificates that cover the handshake's server
// name and that the client supports, the valid one issued last. certmagic
// keeps a certificate's predecessor cached after a renewal it did not
// schedule itself (a forced renewal through the admin API) until its next
// maintenance; its default selection would serve whichever was cached
// first.
type NewestFirst struct{}

// SelectCertificate implements certmagic.CertificateSelector. certmagic
// offers every cached certificate when none is indexed under the name it
// looks up, so candidates are filtered by the server name here.
func (NewestFirst) SelectCertificate(hello *tls.ClientHelloInfo, choices []certmagic.Certificate) (certmagic.Certificate, error) {
	now := time.Now()
	var best, fallback *certmagic.Certificate
	for i := range choices {
		c := &choices[i]
		if c.Leaf == nil || !covers(c, hello.ServerName) {
			continue
		}
		better := !now.Before(c.Leaf.NotBefore) && !now.After(c.Leaf.NotAfter) &&
			(best == nil || c.Leaf.NotBefore.After(best.Leaf.NotBefore) ||
				(c.Leaf.NotBefore.Equal(best.Leaf.NotBefore) && c.Leaf.NotAfter.After(best.Leaf.NotAfter)))
		// SupportsCertificate is the costly check: it runs only for a
		// candidate that would change the answer (certmagic may offer the
		// whole cache, all of which covers an empty server name).
		if (fallback != nil && !better) || hello.SupportsCertificate(&c.Certificate) != nil {
			continue
		}
		if fallback == nil {
			fallback = c
		}
		if better {
			best = c
		}
	}
	switch {
	case best != nil:
		return *best, nil
	case fallback != nil:
		return *fallback, nil
	}
	return certmagic.Certificate{}, errors.New("no cached certificate covers the server name")
}

func covers(c *certmagic.Certificate, serverName string) bool {
	if serverName == "" {
		return true
	}
	for _, n := range c.Names {
		if certmagic.MatchWildcard(serverName, n) {
			return true
		}
	}
	return false
}

// Interface guards
var _ certmagic.CertificateSelector = NewestFirst{}
