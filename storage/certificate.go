package storage

import (
	"net/url"
	"strings"
	"time"
)

func init() { registerTable[Certificate](CertificatesKey, "certificates") }

// CertificatesKey is the key of the []Certificate in Snapshot.Extra.
const CertificatesKey = "certificates"

// Certificate is a TLS certificate: an uploaded (manual) chain with its
// key, or an ACME-managed set of names whose certificate lives in Caddy's
// storage (certmagic). The admin API declares its own input and output
// shapes (adminext/certs); KeyPEM never leaves the store except in an
// export with secrets.
type Certificate struct {
	ID        int64    `gorm:"primaryKey"`
	ACME      bool     `gorm:"column:acme"`
	Domains   []string `gorm:"serializer:json"`
	Challenge string   // ACME: http-01, tls-alpn-01 or dns-01; "" for manual
	CertPEM   string   // manual: the chain, leaf first
	KeyPEM    string   // manual: the private key
	// Status is pending, active, failed or expired; for manual
	// certificates it is derived from the validity period when read.
	Status      string
	Issuer      string
	NotBefore   *time.Time
	NotAfter    *time.Time
	Fingerprint string // SHA-256 of the leaf, hex
	LastError   *string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// TableName implements gorm's tabler.
func (Certificate) TableName() string { return "certificates" }

// Certificates are the certificate rows of a snapshot.
func (s *Snapshot) Certificates() []Certificate { return extraRows[Certificate](s, CertificatesKey) }

// NormalizeACMEDirectory maps a directory alias to its URL, lowercases the
// scheme and host and drops a trailing slash.
func NormalizeACMEDirectory(dir string) string {
	dir = strings.TrimSpace(dir)
	if dir == "" {
		dir = "letsencrypt"
	}
	if u, ok := ACMEDirectoryAliases[strings.ToLower(dir)]; ok {
		return u
	}
	u, err := url.Parse(dir)
	if err != nil {
		return strings.TrimSuffix(dir, "/")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	return strings.TrimSuffix(u.String(), "/")
}
