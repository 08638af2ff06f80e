package backup

import (
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// ACME is the acme section of an export with secrets: the Cloudflare token
// (dns-01) and the EAB credentials per directory, so that a restore keeps
// issuing and renewing. An export without secrets has no acme section.
type ACME struct {
	CloudflareToken *string   `json:"cloudflare_token" schema:"minLength=1" doc:"The Cloudflare API token of dns-01 certificates; null when none is stored."`
	EAB             []ACMEEAB `json:"eab" doc:"External account bindings, one per ACME directory."`
}

// ACMEEAB is one external account binding in an export with secrets; it is
// restored as PUT /api/v1/acme/eab stores it.
type ACMEEAB struct {
	DirectoryURL string `json:"directory_url" schema:"minLength=1" doc:"The normalized ACME directory URL."`
	KeyID        string `json:"key_id" schema:"minLength=1"`
	HMACKey      string `json:"hmac_key" schema:"minLength=1" doc:"base64url."`
}

var acmeKind = Kind{
	Name:        "acme",
	SecretsOnly: true,
	Schema:      func(mode schema.Mode) map[string]any { return schema.JSONSchema(ACME{}, mode) },
	Export:      exportACME,
	Restore:     restoreACME,
}

func exportACME(tx *gorm.DB, secrets bool) (any, error) {
	if !secrets {
		return nil, nil
	}
	out := ACME{EAB: []ACMEEAB{}}
	var tok storage.ACMECloudflareToken
	if err := tx.Limit(1).Find(&tok, 1).Error; err != nil {
		return nil, err
	}
	if tok.Token != "" {
		out.CloudflareToken = &tok.Token
	}
	eabs, err := list[storage.ACMEEAB](tx)
	if err != nil {
		return nil, err
	}
	for _, e := range eabs {
		out.EAB = append(out.EAB, ACMEEAB{DirectoryURL: e.DirectoryURL, KeyID: e.KeyID, HMACKey: e.MACKey})
	}
	return out, nil
}

// restoreACME replaces the stored ACME credentials by the document's; a
// document without an acme section (an export without secrets) leaves
// them as they are.
func restoreACME(r *Restorer, raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var in ACME
	if err := decode("acme", raw, &in); err != nil {
		return err
	}
	if err := deleteAll(&storage.ACMECloudflareToken{}, &storage.ACMEEAB{})(r.Tx); err != nil {
		return err
	}
	now := time.Now().UTC()
	if in.CloudflareToken != nil {
		tok := certs.CloudflareTokenInput{Token: *in.CloudflareToken}
		if tok.Validate() != nil {
			return schema.Errorf("acme.cloudflare_token", "must not be blank")
		}
		if err := r.Tx.Create(&storage.ACMECloudflareToken{ID: 1, Token: tok.Token, UpdatedAt: now}).Error; err != nil {
			return err
		}
	}
	for i, d := range in.EAB {
		e := &certs.EABInput{DirectoryURL: d.DirectoryURL, KeyID: d.KeyID, HMACKey: d.HMACKey}
		if err := e.Validate(); err != nil {
			return schema.Prefix(fmt.Sprintf("acme.eab[%d]", i), err)
		}
		if err := r.Tx.Create(&storage.ACMEEAB{DirectoryURL: e.DirectoryURL, KeyID: e.KeyID, MACKey: e.HMACKey, CreatedAt: now, UpdatedAt: now}).Error; err != nil {
			return err
		}
	}
	return nil
}
