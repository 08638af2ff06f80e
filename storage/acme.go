package storage

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/schema"
)

func init() {
	registerModels(&ACMECloudflareToken{}, &ACMEEAB{})
	registerSnapshotLoader(func(db *gorm.DB, snap *Snapshot) error {
		var tok ACMECloudflareToken
		res := db.Limit(1).Find(&tok, 1)
		if res.Error != nil {
			return fmt.Errorf("reading the Cloudflare token: %w", res.Error)
		}
		snap.Extra[CloudflareTokenKey] = tok.Token
		var eabs []ACMEEAB
		if err := db.Order("id").Find(&eabs).Error; err != nil {
			return fmt.Errorf("reading ACME EAB credentials: %w", err)
		}
		snap.Extra[ACMEEABKey] = eabs
		return nil
	})
}

// Keys of Snapshot.Extra.
const (
	CloudflareTokenKey = "acme_cloudflare_token" // string, "" when not configured
	ACMEEABKey         = "acme_eab"              // []ACMEEAB
)

// ACMECloudflareToken is the one Cloudflare API token (row id 1) used for
// DNS-01 challenges. It never leaves the store except in the compiled
// config and in an export with secrets.
type ACMECloudflareToken struct {
	ID        int64 `gorm:"primaryKey"`
	Token     string
	UpdatedAt time.Time
}

// TableName implements gorm's tabler.
func (ACMECloudflareToken) TableName() string { return "acme_cloudflare_token" }

// ACMEEAB is an ACME external account binding, scoped to a normalized
// directory URL. MACKey is base64url (as the CA hands it out).
type ACMEEAB struct {
	ID           int64  `gorm:"primaryKey"`
	DirectoryURL string `gorm:"uniqueIndex"`
	KeyID        string
	MACKey       string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// TableName implements gorm's tabler.
func (ACMEEAB) TableName() string { return "acme_eab" }

// CloudflareToken is the snapshot's Cloudflare token ("" when none).
func (s *Snapshot) CloudflareToken() string {
	t, _ := s.Extra[CloudflareTokenKey].(string)
	return t
}

// EABFor is the snapshot's EAB for a directory URL (normalized here), or nil.
func (s *Snapshot) EABFor(dir string) *ACMEEAB {
	eabs, _ := s.Extra[ACMEEABKey].([]ACMEEAB)
	dir = NormalizeACMEDirectory(dir)
	for i := range eabs {
		if eabs[i].DirectoryURL == dir {
			return &eabs[i]
		}
	}
	return nil
}

// CheckACMEDirectory checks an ACME directory: one of the aliases of
// ACMEDirectoryAliases, or an https URL (schema.HTTPURL's rules). ACME runs
// over HTTPS only (RFC 8555, section 6.1): over plain HTTP whoever is on
// the path would answer the account's requests and see the external
// account binding.
func CheckACMEDirectory(dir string) error {
	if _, ok := ACMEDirectoryAliases[dir]; ok {
		return nil
	}
	u, err := schema.HTTPURL(dir)
	if err == nil && u.Scheme != "https" {
		err = errors.New("must use https (ACME runs over HTTPS only)")
	}
	if err != nil {
		return fmt.Errorf("%v; or one of the aliases %s", err, strings.Join(ACMEDirectoryAliasNames(), ", "))
	}
	return nil
}

// ACMEDirectoryAliasNames are the aliases of ACMEDirectoryAliases, sorted.
func ACMEDirectoryAliasNames() []string {
	return slices.Sorted(maps.Keys(ACMEDirectoryAliases))
}

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
