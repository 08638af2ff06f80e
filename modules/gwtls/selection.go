package gwtls

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
)

// Newest wraps next, the GetCertificate of the HTTPS listener's TLS
// connection policy (certmagic's handshake logic): a handshake whose server
// name has cached certificates gets the valid one issued last that the
// client supports among those naming it exactly, else among the wildcards
// covering it (newest); any other handshake (no
// server name, a name without a cached certificate, a TLS-ALPN challenge)
// goes to next. lookup finds a name's cached certificates
// (caddytls.AllMatchingCertificates: index lookups, no walk of the cache).
//
// Why not certmagic's own choice: after a renewal it did not schedule (a
// forced renewal through the admin API) certmagic keeps the previous
// certificate cached beside the renewed one until its maintenance replaces
// it, and serves the one cached first. A certmagic.CertificateSelector
// would pick the renewed one, but with a selection set certmagic offers it
// the whole cache, copied, on every handshake whose name has no exact entry
// (every host under a wildcard certificate, and handshakes without a server
// name, where the selection cannot tell which name was looked up). And no
// exported call replaces a managed certificate in the cache: Caddy keeps
// the cache to itself, and certmagic's replacement of a cached certificate
// (Config.CacheUnmanagedCertificatePEMBytesAsReplacement) leaves the
// renewed one unmanaged, so it would never be renewed again.
func Newest(next func(*tls.ClientHelloInfo) (*tls.Certificate, error), lookup func(name string) []certmagic.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
		if name == "" || isChallenge(hello) {
			return next(hello)
		}
		if c, ok := newest(hello, name, lookup(name)); ok {
			return &c.Certificate, nil
		}
		return next(hello)
	}
}

// isChallenge reports a TLS-ALPN-01 validation handshake (RFC 8737: its
// only protocol is acme-tls/1): certmagic answers it with the challenge
// certificate.
func isChallenge(hello *tls.ClientHelloInfo) bool {
	return len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == "acme-tls/1"
}

// newest is, among choices, the valid certificate for name (lowercase)
// issued last that the client supports, or the first one the client
// supports when none is valid (certmagic's default, too, serves an expired
// certificate rather than none). Certificates naming name exactly come
// first (docs/tls.md: exact name, else a wildcard; certmagic looks the
// exact name up first too): a wildcard is chosen only when no exact
// certificate the client supports is cached, however recently it was
// issued.
func newest(hello *tls.ClientHelloInfo, name string, choices []certmagic.Certificate) (certmagic.Certificate, bool) {
	if c, ok := newestOf(hello, choices, func(names []string) bool { return slices.Contains(names, name) }); ok {
		return c, true
	}
	return newestOf(hello, choices, func(names []string) bool { return coversWildcard(names, name) })
}

// newestOf is newest among the choices whose names match.
func newestOf(hello *tls.ClientHelloInfo, choices []certmagic.Certificate, match func(names []string) bool) (certmagic.Certificate, bool) {
	now := time.Now()
	var best, fallback *certmagic.Certificate
	for i := range choices {
		c := &choices[i]
		if c.Leaf == nil || !match(c.Names) {
			continue
		}
		better := !now.Before(c.Leaf.NotBefore) && !now.After(c.Leaf.NotAfter) &&
			(best == nil || Later(c, best))
		// SupportsCertificate is the costly check: it runs only for a
		// candidate that would change the answer.
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
		return *best, true
	case fallback != nil:
		return *fallback, true
	}
	return certmagic.Certificate{}, false
}

// Later reports whether certificate a was issued after b (both with a
// leaf): a later NotBefore, else a later NotAfter, else a is the one
// issued last for one of its names (Issued). ASN.1 times have one-second
// resolution: a certificate renewed within the second its predecessor was
// issued (a forced renewal right after issuance) ties with it on both.
func Later(a, b *certmagic.Certificate) bool {
	if !a.Leaf.NotBefore.Equal(b.Leaf.NotBefore) {
		return a.Leaf.NotBefore.After(b.Leaf.NotBefore)
	}
	if !a.Leaf.NotAfter.Equal(b.Leaf.NotAfter) {
		return a.Leaf.NotAfter.After(b.Leaf.NotAfter)
	}
	return issuedLast(a) && !issuedLast(b)
}

// lastIssued is, per name, the SHA-256 of the leaf this process saw
// issued last for it (Issued): the tie-break of Later. One entry per name
// ever issued here (a name and 32 bytes), kept for the process.
var lastIssued struct {
	sync.Mutex
	leaf map[string][sha256.Size]byte
}

// Issued records that leaf was just issued for name (certmagic's
// cert_obtained event, which comes before the renewed certificate is
// cached): among cached certificates with the same validity, the one
// with this leaf is the newest for name.
func Issued(name string, leaf *x509.Certificate) {
	sum := sha256.Sum256(leaf.Raw)
	lastIssued.Lock()
	defer lastIssued.Unlock()
	if lastIssued.leaf == nil {
		lastIssued.leaf = map[string][sha256.Size]byte{}
	}
	lastIssued.leaf[strings.ToLower(name)] = sum
}

// issuedLast reports whether c's leaf is the one issued last for one of
// its names.
func issuedLast(c *certmagic.Certificate) bool {
	sum := sha256.Sum256(c.Leaf.Raw)
	lastIssued.Lock()
	defer lastIssued.Unlock()
	for _, n := range c.Names {
		if last, ok := lastIssued.leaf[n]; ok && last == sum {
			return true
		}
	}
	return false
}

// coversWildcard reports whether one of names is a wildcard covering
// exactly name's first label (names are lowercase in certmagic's cache).
func coversWildcard(names []string, name string) bool {
	_, parent, _ := strings.Cut(name, ".")
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, "*."); ok && parent != "" && rest == parent && !strings.HasPrefix(name, ".") {
			return true
		}
	}
	return false
}
