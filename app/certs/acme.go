package certs

import (
	"context"
	"encoding/base64"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// CloudflareTokenInput is the body of PUT /api/v1/acme/cloudflare-token.
type CloudflareTokenInput struct {
	Token string `json:"token" schema:"minLength=1,writeonly" doc:"Cloudflare API token with Zone:Read and DNS:Edit on the zones of dns-01 certificates; never returned."`
}

// Validate implements schema.Validator.
func (in *CloudflareTokenInput) Validate() error {
	if strings.TrimSpace(in.Token) == "" {
		return schema.Errorf("token", "is required")
	}
	return nil
}

// EABInput is the body of PUT /api/v1/acme/eab.
type EABInput struct {
	DirectoryURL string `json:"directory_url" schema:"minLength=1" doc:"ACME directory: an https URL, or an alias (letsencrypt, letsencrypt-staging, zerossl, google, google-staging); stored normalized."`
	KeyID        string `json:"key_id" schema:"minLength=1,writeonly" doc:"The CA's EAB key identifier; never returned."`
	HMACKey      string `json:"hmac_key" schema:"minLength=1,writeonly" doc:"The CA's EAB HMAC key, base64url; never returned."`
}

// Validate implements schema.Validator.
func (in *EABInput) Validate() error {
	dir, err := directory(in.DirectoryURL)
	if err != nil {
		return err
	}
	in.DirectoryURL = dir
	if in.KeyID == "" {
		return schema.Errorf("key_id", "is required")
	}
	in.HMACKey = strings.TrimRight(strings.TrimSpace(in.HMACKey), "=")
	if b, err := base64.RawURLEncoding.DecodeString(in.HMACKey); err != nil || len(b) == 0 {
		return schema.Errorf("hmac_key", "must be base64url")
	}
	return nil
}

// Configured answers the Cloudflare token and EAB changes.
type Configured struct {
	Configured bool `json:"configured"`
}

// EABStatus is the answer of GET /api/v1/acme/eab: booleans only.
type EABStatus struct {
	DirectoryURL      string `json:"directory_url" doc:"The normalized directory URL."`
	Configured        bool   `json:"configured" doc:"EAB credentials are stored for this directory."`
	AccountRegistered bool   `json:"account_registered" doc:"Caddy's storage holds an ACME account registered with this directory."`
}

func acmeEndpoints() []*api.Endpoint {
	dirQuery := []api.QueryParam{{Name: "directory_url", Type: "string", Required: true,
		Description: "ACME directory URL or alias"}}
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/acme/cloudflare-token", Role: api.RoleViewer, Tag: "certificates",
			Summary:  "Whether a Cloudflare API token (for dns-01) is configured; the token is never returned",
			Response: Configured{}, Handle: getToken},
		{Method: "PUT", Path: "/api/v1/acme/cloudflare-token", Role: api.RoleAdmin, Tag: "certificates",
			Summary: "Set the Cloudflare API token used for dns-01 challenges", Body: CloudflareTokenInput{},
			Response: Configured{}, Statuses: []int{400}, Handle: putToken},
		{Method: "DELETE", Path: "/api/v1/acme/cloudflare-token", Role: api.RoleAdmin, Tag: "certificates",
			Summary:     "Remove the Cloudflare API token",
			Description: "dns-01 certificates stay pending (not managed) until a token is set again.",
			Response:    Configured{}, Handle: deleteToken},
		{Method: "GET", Path: "/api/v1/acme/eab", Role: api.RoleAdmin, Tag: "certificates",
			Summary: "EAB registration status for a directory (booleans only)", Query: dirQuery,
			Response: EABStatus{}, Statuses: []int{400}, Handle: getEAB},
		{Method: "PUT", Path: "/api/v1/acme/eab", Role: api.RoleAdmin, Tag: "certificates",
			Summary:     "Set external account binding credentials for a directory",
			Description: "Scoped to the normalized directory URL; used only to register a new ACME account (an existing account is reused).",
			Body:        EABInput{}, Response: Configured{}, Statuses: []int{400}, Handle: putEAB},
		{Method: "DELETE", Path: "/api/v1/acme/eab", Role: api.RoleAdmin, Tag: "certificates",
			Summary:     "Remove the EAB credentials of a directory",
			Description: "An already registered account is kept and its certificates keep renewing.",
			Query:       dirQuery, Response: Configured{}, Statuses: []int{400}, Handle: deleteEAB},
	}
}

// directory validates and normalizes a directory URL or alias.
func directory(raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", schema.Errorf("directory_url", "is required")
	}
	dir := storage.NormalizeACMEDirectory(raw)
	if err := storage.CheckACMEDirectory(dir); err != nil {
		return "", schema.Errorf("directory_url", "%v", err)
	}
	return dir, nil
}

func getToken(c *api.Call) (any, error) {
	var n int64
	if err := c.CP.Store().DB.WithContext(c.Ctx()).Model(&storage.ACMECloudflareToken{}).
		Where("id = 1 AND token <> ''").Count(&n).Error; err != nil {
		return nil, err
	}
	return Configured{Configured: n > 0}, nil
}

func putToken(c *api.Call) (any, error) {
	in := new(CloudflareTokenInput)
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	row := &storage.ACMECloudflareToken{ID: 1, Token: in.Token, UpdatedAt: time.Now().UTC()}
	return configure(c, true, func(tx *gorm.DB) error { return tx.Save(row).Error })
}

func deleteToken(c *api.Call) (any, error) {
	return configure(c, false, func(tx *gorm.DB) error {
		return tx.Where("id = 1").Delete(&storage.ACMECloudflareToken{}).Error
	})
}

// configure stores a change of the ACME credentials (fn, in a mutation) and
// answers whether they are now configured.
func configure(c *api.Call, configured bool, fn func(tx *gorm.DB) error) (any, error) {
	if err := c.CP.Mutate(c.Ctx(), fn); err != nil {
		return nil, err
	}
	return Configured{Configured: configured}, nil
}

func getEAB(c *api.Call) (any, error) {
	dir, err := directory(c.R.URL.Query().Get("directory_url"))
	if err != nil {
		return nil, err
	}
	var n int64
	if err := c.CP.Store().DB.WithContext(c.Ctx()).Model(&storage.ACMEEAB{}).
		Where("directory_url = ?", dir).Count(&n).Error; err != nil {
		return nil, err
	}
	return EABStatus{DirectoryURL: dir, Configured: n > 0, AccountRegistered: AccountRegistered(c.Ctx(), dir)}, nil
}

func putEAB(c *api.Call) (any, error) {
	in := new(EABInput)
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	row := &storage.ACMEEAB{DirectoryURL: in.DirectoryURL, KeyID: in.KeyID, MACKey: in.HMACKey, CreatedAt: now, UpdatedAt: now}
	return configure(c, true, func(tx *gorm.DB) error {
		return tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "directory_url"}},
			DoUpdates: clause.AssignmentColumns([]string{"key_id", "mac_key", "updated_at"}),
		}).Create(row).Error
	})
}

func deleteEAB(c *api.Call) (any, error) {
	dir, err := directory(c.R.URL.Query().Get("directory_url"))
	if err != nil {
		return nil, err
	}
	return configure(c, false, func(tx *gorm.DB) error {
		return tx.Where("directory_url = ?", dir).Delete(&storage.ACMEEAB{}).Error
	})
}

// AccountRegistered reports whether Caddy's storage holds an ACME account
// (a registration of any email) for the directory, where certmagic keeps
// them: acme/<issuer key>/users/<email>/<name>.json.
func AccountRegistered(ctx context.Context, dir string) (found bool) {
	defer func() {
		if recover() != nil { // no config is running
			found = false
		}
	}()
	st := caddy.ActiveContext().Storage()
	if st == nil {
		return false
	}
	prefix := path.Join("acme", certmagic.StorageKeys.Safe((&certmagic.ACMEIssuer{CA: dir}).IssuerKey()), "users")
	keys, err := st.List(ctx, prefix, true)
	if err != nil {
		return false
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ".json") {
			return true
		}
	}
	return false
}
