package pluginapi

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/internal/consumers"
	_ "github.com/caddy-gateway/gateway/modules/plugins/auth" // declares the credential kinds
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// credentialDescription says which fields apply to which type, from the
// registered kinds; each field's own description says the rest.
func credentialDescription() string {
	var b strings.Builder
	b.WriteString("The fields that apply depend on type; the others must be left out (400). ")
	for _, k := range consumers.Kinds() {
		names := slices.Clone(k.Fields)
		if i := slices.Index(names, "password_hash"); i >= 0 {
			names[i] = "password" // the input's name for what is stored hashed
		}
		fmt.Fprintf(&b, "%s: %s. ", k.Name, strings.Join(names, ", "))
	}
	b.WriteString("Answers never carry password, password hash or secret.")
	return b.String()
}

// Credential declares the input of a credential create request (the
// OpenAPI document calls it CredentialInput): one declaration for the three
// types, whose Validate applies the rules of its type. Its fields are also
// what answers (credentialView) and export documents (package backup) say
// of a credential.
type Credential struct {
	Type      string  `json:"type" schema:"required,enum=@credential-type"`
	Key       *string `json:"key" schema:"minLength=1,maxLength=1024" doc:"key-auth: the API key, a bearer secret (viewers see \"<redacted>\"; in exports only with include_secrets); jwt: the value matched against the token's key claim (iss). Optional: 32 random bytes, hex, when absent. Unique per type."`
	Username  *string `json:"username" schema:"name,minLength=1,maxLength=255" doc:"basic-auth only, required; no colon; unique among basic-auth credentials."`
	Password  *string `json:"password" schema:"minLength=1,maxLength=72,writeonly" doc:"basic-auth only, required; at most 72 bytes; stored as a bcrypt hash, never returned."`
	Algorithm *string `json:"algorithm" schema:"enum=@jwt-algorithm" doc:"jwt only; default HS256."`
	Secret    *string `json:"secret" schema:"minLength=1,maxLength=1024,writeonly" doc:"jwt with HS256, HS384 or HS512 only, required: the HMAC secret; never in answers (in exports only with include_secrets)."`
	PublicKey *string `json:"public_key" schema:"text,minLength=1,maxLength=16384" doc:"jwt with RS256 or ES256 only, required: the PEM public key (RSA of at least 1024 bits, 2048 recommended, for RS256; ECDSA P-256 for ES256); a text holding a private key is 400 (answers show public_key)."`
}

// Validate implements schema.Validator: the rules of the credential's
// kind (consumers.Kind, declared beside its plugin), on the input as the
// kind stores it (the password stands for its hash, an absent generated key
// for the key).
func (in *Credential) Validate() error {
	c := in.Compiled()
	if in.Password != nil {
		c.PasswordHash = "x" // hashed once valid (row)
	}
	if k, ok := consumers.KindOf(in.Type); ok && k.Generated && *c.Field(k.Unique) == "" {
		*c.Field(k.Unique) = "x" // generated once valid (row)
	}
	if _, err := consumers.Prepare(&c); err != nil {
		var fe *schema.FieldError
		if errors.As(err, &fe) && fe.Field == "password_hash" {
			return schema.Errorf("password", "%s", fe.Msg)
		}
		return err
	}
	if in.Password != nil && len(*in.Password) > 72 {
		return schema.Errorf("password", "must be at most 72 bytes") // bcrypt's limit
	}
	if c.Algorithm != "" {
		in.Algorithm = &c.Algorithm // the kind's default
	}
	return nil
}

// Compiled is the input in its kind's form, without the password.
func (in *Credential) Compiled() consumers.Credential {
	return consumers.Credential{Type: in.Type, Key: deref(in.Key), Username: deref(in.Username),
		Algorithm: deref(in.Algorithm), Secret: deref(in.Secret), PublicKey: deref(in.PublicKey)}
}

// row builds the stored credential of a valid input (hashing the password,
// generating an absent key).
func (in *Credential) row(consumerID int64) (*storage.Credential, error) {
	c := in.Compiled()
	k, _ := consumers.Prepare(&c)
	if err := Generate(k, &c); err != nil {
		return nil, err
	}
	if in.Password != nil {
		h, err := bcrypt.GenerateFromPassword([]byte(*in.Password), bcrypt.DefaultCost)
		if err != nil {
			return nil, errors.New("hashing the password failed")
		}
		c.PasswordHash = string(h)
	}
	return storage.CredentialRow(consumerID, c), nil
}

// Generate fills an absent generated key of c (kind k) as the create
// endpoint does (the configuration import too).
func Generate(k consumers.Kind, c *consumers.Credential) error {
	if f := c.Field(k.Unique); k.Generated && *f == "" {
		key, err := consumers.RandomKey()
		if err != nil {
			return err
		}
		*f = key
	}
	return nil
}

// Credential answers are generated from the kinds: a credential's identity
// and the fields of its kind that the input above does not declare
// write-only (secrets never leave the store).

// answered is the input's answer view (write-only fields left out).
var answered = sync.OnceValue(func() map[string]any {
	return schema.JSONSchema(Credential{}, schema.Output)["properties"].(map[string]any)
})

// answerFields are the fields of kind k that its answers carry besides
// the identity (id, consumer_id, type, created_at).
func answerFields(k consumers.Kind) []string {
	var out []string
	for _, name := range k.Fields {
		if _, ok := answered()[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

// credentialView is the answer for a credential row: its identity and its
// kind's answered fields (null when empty). A viewer sees the kind's
// secrets among them as "<redacted>": a key-auth key is all a client needs
// to pass as the consumer.
func credentialView(cr *storage.Credential, viewer bool) map[string]any {
	v := map[string]any{"id": cr.ID, "consumer_id": cr.ConsumerID, "type": cr.Type, "created_at": cr.CreatedAt}
	k, ok := consumers.KindOf(cr.Type)
	if !ok {
		return v // a type this API does not know (never written by it): only the identity
	}
	c := cr.Compiled()
	secrets := k.Secrets(&c)
	for _, name := range answerFields(k) {
		switch val := *c.Field(name); {
		case viewer && slices.Contains(secrets, name):
			v[name] = schema.Redacted
		case val == "":
			v[name] = nil
		default:
			v[name] = val
		}
	}
	return v
}

// credentialOutputSchema describes a credential answer: one shape per
// kind, told apart by type.
func credentialOutputSchema() (one, list map[string]any) {
	row := schema.JSONSchema(storage.Credential{}, schema.Output)["properties"].(map[string]any)
	var shapes []any
	for _, k := range consumers.Kinds() {
		props := map[string]any{"type": map[string]any{"type": "string", "enum": []any{k.Name}}}
		required := []string{"id", "consumer_id", "type"}
		always := alwaysSet(k)
		for _, name := range answerFields(k) {
			props[name] = answered()[name]
			if slices.Contains(always, name) {
				props[name] = notNull(props[name].(map[string]any))
			}
			required = append(required, name)
		}
		for _, name := range []string{"id", "consumer_id", "created_at"} {
			props[name] = row[name]
		}
		shapes = append(shapes, map[string]any{"type": "object", "properties": props,
			"required": append(required, "created_at"), "additionalProperties": false})
	}
	one = map[string]any{"oneOf": shapes}
	return one, map[string]any{"type": "array", "items": one}
}

// alwaysSet are the fields every stored credential of kind k has: the
// unique one (required or generated) and those its defaults fill.
func alwaysSet(k consumers.Kind) []string {
	out := []string{k.Unique}
	if k.Normalize != nil {
		c := consumers.Credential{Type: k.Name}
		k.Normalize(&c)
		for _, name := range k.Fields {
			if *c.Field(name) != "" {
				out = append(out, name)
			}
		}
	}
	return out
}

// notNull is a copy of the field schema s without null among its types and
// values.
func notNull(s map[string]any) map[string]any {
	out := maps.Clone(s)
	if types, ok := s["type"].([]any); ok {
		out["type"] = types[0]
	}
	if enum, ok := s["enum"].([]any); ok {
		out["enum"] = slices.DeleteFunc(slices.Clone(enum), func(v any) bool { return v == nil })
	}
	return out
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
	err = api.Write(c, cr, func(tx *gorm.DB, cr *storage.Credential) error {
		if err := api.Exists[storage.Consumer](tx, "consumer_id", cid); err != nil {
			return err
		}
		return CheckCredentialUnique(tx, cr)
	}, (*gorm.DB).Create)
	if err != nil {
		return nil, err
	}
	return credentialView(cr, false), nil
}

// CheckCredentialUnique: the identifying value of a kind (key-auth and jwt
// keys, basic-auth usernames) is unique within the kind (inside tx; the
// create endpoint and the configuration import).
func CheckCredentialUnique(tx *gorm.DB, cr *storage.Credential) error {
	k, ok := consumers.KindOf(cr.Type)
	if !ok {
		return nil
	}
	c := cr.Compiled()
	val := *c.Field(k.Unique)
	if val == "" {
		return nil
	}
	var n int64
	if err := tx.Model(&storage.Credential{}).Where(map[string]any{"type": cr.Type, k.Unique: val}).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return schema.Errorf(k.Unique, "is already used by another %s credential", cr.Type)
	}
	return nil
}

// isViewer tells whether the caller has the viewer role (open mode acts as
// admin).
func isViewer(c *api.Call) bool {
	p := api.PrincipalFrom(c.Ctx())
	return p != nil && p.Role == "viewer"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
