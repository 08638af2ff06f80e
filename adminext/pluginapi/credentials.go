package pluginapi

import (
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/adminext/api"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

const credentialDescription = "The fields that apply depend on type; the others must be left out (400). " +
	"key-auth: key (optional; 32 random bytes, hex, when absent; unique among key-auth keys). " +
	"basic-auth: username (required; unique among basic-auth credentials; no colon), password (required, write-only, stored as a bcrypt hash; at most 72 bytes). " +
	"jwt: key (optional, matched against the token's key claim, iss by default; 32 random bytes, hex, when absent; unique among jwt keys), " +
	"algorithm (HS256 default, HS384, HS512, RS256, ES256), secret (required for HS*, write-only), public_key (PEM, required for RS256 (RSA) and ES256 (ECDSA P-256)). " +
	"Answers never carry password, password hash or secret."

// Credential declares the input of a credential create request (the
// OpenAPI document calls it CredentialInput): one declaration for the three
// types, whose Validate applies the rules of its type. Answers are
// KeyAuthCredential, BasicAuthCredential or JWTCredential.
type Credential struct {
	Type      string  `json:"type" schema:"required,enum=key-auth|basic-auth|jwt"`
	Key       *string `json:"key" schema:"minLength=1,maxLength=1024" doc:"key-auth: the API key; jwt: the value matched against the token's key claim (iss). Optional: 32 random bytes, hex, when absent. Unique per type."`
	Username  *string `json:"username" schema:"name,minLength=1,maxLength=255" doc:"basic-auth only, required; unique among basic-auth credentials."`
	Password  *string `json:"password" schema:"minLength=1,maxLength=72,writeonly" doc:"basic-auth only, required; stored as a bcrypt hash, never returned."`
	Algorithm *string `json:"algorithm" schema:"enum=HS256|HS384|HS512|RS256|ES256" doc:"jwt only; default HS256."`
	Secret    *string `json:"secret" schema:"minLength=1,maxLength=1024,writeonly" doc:"jwt with HS256, HS384 or HS512 only, required: the HMAC secret; never returned."`
	PublicKey *string `json:"public_key" schema:"text,minLength=1,maxLength=16384" doc:"jwt with RS256 or ES256 only, required: the PEM public key (RSA for RS256, ECDSA P-256 for ES256)."`
}

// Validate implements schema.Validator: the rules of the credential's type.
func (in *Credential) Validate() error {
	allowed := map[string]map[string]bool{
		"key-auth":   {"key": true},
		"basic-auth": {"username": true, "password": true},
		"jwt":        {"key": true, "algorithm": true, "secret": true, "public_key": true},
	}[in.Type]
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"key", in.Key != nil}, {"username", in.Username != nil}, {"password", in.Password != nil},
		{"algorithm", in.Algorithm != nil}, {"secret", in.Secret != nil}, {"public_key", in.PublicKey != nil},
	} {
		if f.set && !allowed[f.name] {
			return schema.Errorf(f.name, "does not apply to %s credentials", in.Type)
		}
	}
	switch in.Type {
	case "basic-auth":
		if in.Username == nil {
			return schema.Errorf("username", "is required")
		}
		if strings.Contains(*in.Username, ":") {
			return schema.Errorf("username", "must not contain a colon")
		}
		if in.Password == nil {
			return schema.Errorf("password", "is required")
		}
		if len(*in.Password) > 72 {
			return schema.Errorf("password", "must be at most 72 bytes")
		}
	case "jwt":
		if in.Algorithm == nil {
			alg := "HS256"
			in.Algorithm = &alg
		}
		switch alg := *in.Algorithm; alg {
		case "HS256", "HS384", "HS512":
			if in.Secret == nil {
				return schema.Errorf("secret", "is required for %s", alg)
			}
			if in.PublicKey != nil {
				return schema.Errorf("public_key", "does not apply to %s (use secret)", alg)
			}
		case "RS256", "ES256":
			if in.PublicKey == nil {
				return schema.Errorf("public_key", "is required for %s", alg)
			}
			if in.Secret != nil {
				return schema.Errorf("secret", "does not apply to %s (use public_key)", alg)
			}
			if err := checkPublicKey(alg, *in.PublicKey); err != nil {
				return schema.Errorf("public_key", "%s", err.Error())
			}
		}
	}
	return nil
}

// checkPublicKey parses a PEM public key the way the jwt plugin will.
func checkPublicKey(alg, pemText string) error {
	if alg == "RS256" {
		if _, err := jwt.ParseRSAPublicKeyFromPEM([]byte(pemText)); err != nil {
			return errors.New("must be a PEM-encoded RSA public key (PKIX, PKCS#1 or a certificate)")
		}
		return nil
	}
	k, err := jwt.ParseECPublicKeyFromPEM([]byte(pemText))
	if err != nil {
		return errors.New("must be a PEM-encoded ECDSA public key (PKIX or a certificate)")
	}
	if k.Curve != elliptic.P256() {
		return errors.New("ES256 needs an ECDSA P-256 key")
	}
	return nil
}

// row builds the stored credential (hashing the password, generating an
// absent key).
func (in *Credential) row(consumerID int64) (*storage.Credential, error) {
	cr := &storage.Credential{ConsumerID: consumerID, Type: in.Type}
	switch in.Type {
	case "key-auth", "jwt":
		cr.Key = in.Key
		if cr.Key == nil {
			k, err := randomKey()
			if err != nil {
				return nil, err
			}
			cr.Key = &k
		}
	}
	switch in.Type {
	case "basic-auth":
		u := *in.Username
		cr.Username = &u
		h, err := bcrypt.GenerateFromPassword([]byte(*in.Password), bcrypt.DefaultCost)
		if err != nil {
			return nil, errors.New("hashing the password failed")
		}
		cr.PasswordHash = string(h)
	case "jwt":
		alg := *in.Algorithm
		cr.Algorithm = &alg
		if in.Secret != nil {
			cr.Secret = *in.Secret
		}
		if in.PublicKey != nil {
			pk := *in.PublicKey
			cr.PublicKey = &pk
		}
	}
	return cr, nil
}

func randomKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Credential answers, per type: secrets never leave the store.

// KeyAuthCredential is the answer for a key-auth credential.
type KeyAuthCredential struct {
	ID         int64     `json:"id"`
	ConsumerID int64     `json:"consumer_id"`
	Type       string    `json:"type" schema:"enum=key-auth"`
	Key        string    `json:"key" doc:"The API key; viewers see \"<redacted>\" (a key-auth key is a bearer secret)."`
	CreatedAt  time.Time `json:"created_at"`
}

// redactedKey replaces a key-auth key in answers to viewers.
const redactedKey = "<redacted>"

// BasicAuthCredential is the answer for a basic-auth credential.
type BasicAuthCredential struct {
	ID         int64     `json:"id"`
	ConsumerID int64     `json:"consumer_id"`
	Type       string    `json:"type" schema:"enum=basic-auth"`
	Username   string    `json:"username"`
	CreatedAt  time.Time `json:"created_at"`
}

// JWTCredential is the answer for a jwt credential (public_key is null for
// the HS* algorithms).
type JWTCredential struct {
	ID         int64     `json:"id"`
	ConsumerID int64     `json:"consumer_id"`
	Type       string    `json:"type" schema:"enum=jwt"`
	Key        string    `json:"key"`
	Algorithm  string    `json:"algorithm" schema:"enum=HS256|HS384|HS512|RS256|ES256"`
	PublicKey  *string   `json:"public_key"`
	CreatedAt  time.Time `json:"created_at"`
}

// otherCredential answers a row of a type this API does not know (never
// written by it); only the identity, nothing that may be secret.
type otherCredential struct {
	ID         int64     `json:"id"`
	ConsumerID int64     `json:"consumer_id"`
	Type       string    `json:"type"`
	CreatedAt  time.Time `json:"created_at"`
}

// credentialView is the answer for a credential row; a viewer never sees a
// key-auth key (it is all a client needs to pass as the consumer).
func credentialView(cr *storage.Credential, viewer bool) any {
	switch cr.Type {
	case "key-auth":
		key := deref(cr.Key)
		if viewer {
			key = redactedKey
		}
		return KeyAuthCredential{cr.ID, cr.ConsumerID, cr.Type, key, cr.CreatedAt}
	case "basic-auth":
		return BasicAuthCredential{cr.ID, cr.ConsumerID, cr.Type, deref(cr.Username), cr.CreatedAt}
	case "jwt":
		alg := deref(cr.Algorithm)
		if alg == "" {
			alg = "HS256"
		}
		return JWTCredential{cr.ID, cr.ConsumerID, cr.Type, deref(cr.Key), alg, cr.PublicKey, cr.CreatedAt}
	}
	return otherCredential{cr.ID, cr.ConsumerID, cr.Type, cr.CreatedAt}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// credentialOutputSchema describes a credential answer: one of the three
// per-type shapes, told apart by type.
func credentialOutputSchema() (one, list map[string]any) {
	one = map[string]any{
		"oneOf": []any{
			schema.JSONSchema(KeyAuthCredential{}, schema.Output),
			schema.JSONSchema(BasicAuthCredential{}, schema.Output),
			schema.JSONSchema(JWTCredential{}, schema.Output),
		},
	}
	return one, map[string]any{"type": "array", "items": one}
}

func listCredentials(c *api.Call) (any, error) {
	out := make([]any, 0)
	id, err := c.ID("consumer_id")
	if err != nil {
		return nil, err // not an id (a valid id of no consumer lists nothing)
	}
	var rows []storage.Credential
	if err := c.CP.Store().DB.WithContext(c.Ctx()).Where("consumer_id = ?", id).Order("id").Find(&rows).Error; err != nil {
		return nil, err
	}
	viewer := isViewer(c)
	for i := range rows {
		out = append(out, credentialView(&rows[i], viewer))
	}
	return out, nil
}

func createCredential(c *api.Call) (any, error) {
	cid, err := c.ID("consumer_id")
	if err != nil {
		return nil, err
	}
	in := new(Credential)
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	cr, err := in.row(cid) // bcrypt outside the mutation lock
	if err != nil {
		return nil, err
	}
	err = c.CP.Mutate(c.Ctx(), func(tx *gorm.DB) error {
		if err := api.Exists[storage.Consumer](tx, "consumer_id", cid); err != nil {
			return err
		}
		if err := checkCredentialUnique(tx, cr); err != nil {
			return err
		}
		return tx.Create(cr).Error
	})
	if err != nil {
		return nil, err
	}
	return credentialView(cr, false), nil
}

// checkCredentialUnique: key-auth keys, jwt keys and basic-auth usernames
// are each unique within their type.
func checkCredentialUnique(tx *gorm.DB, cr *storage.Credential) error {
	field, val := "key", cr.Key
	if cr.Type == "basic-auth" {
		field, val = "username", cr.Username
	}
	if val == nil {
		return nil
	}
	var n int64
	if err := tx.Model(&storage.Credential{}).Where(map[string]any{"type": cr.Type, field: *val}).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return schema.Errorf(field, "is already used by another %s credential", cr.Type)
	}
	return nil
}

// CheckCredentialUnique is the credential endpoint's uniqueness check inside
// tx (used by the configuration import).
func CheckCredentialUnique(tx *gorm.DB, cr *storage.Credential) error {
	return checkCredentialUnique(tx, cr)
}

// isViewer tells whether the caller has the viewer role (open mode acts as
// admin).
func isViewer(c *api.Call) bool {
	p := api.PrincipalFrom(c.Ctx())
	return p != nil && p.Role == "viewer"
}
