package consumers

import (
	"crypto/rand"
	"encoding/hex"
	"reflect"
	"slices"
	"sync"

	"github.com/caddy-gateway/gateway/schema"
)

// Kind declares a credential kind (key-auth, basic-auth, jwt) once, beside
// the plugin that checks it (package auth registers them): its fields, the
// one that identifies the consumer, its secrets, its rules and its
// Caddyfile line. The admin API, the configuration export and import, the
// Caddyfile and the consumer table loop over the registered kinds.
type Kind struct {
	// Name is the credential type ("key-auth").
	Name string
	// Fields are the fields of the kind (JSON names of Credential); the
	// others stay empty. The API's input says password for password_hash.
	Fields []string
	// Unique is the field whose value identifies the consumer: unique
	// among the kind's credentials, and what the table finds it by.
	Unique string
	// Generated: an absent Unique value is filled with RandomKey.
	Generated bool
	// Secrets names the fields of c that are secrets: never in answers,
	// in exports only with secrets, needed by a restore.
	Secrets func(c *Credential) []string
	// Normalize fills the kind's defaults (nil: none).
	Normalize func(c *Credential)
	// Check validates c (normalized) beyond the declared tags: required
	// fields and material; errors name the field.
	Check func(c *Credential) error
	// Directive is the kind's line in an inline consumer block of a
	// Caddyfile, Args names its arguments (a line with another number of
	// them is refused), and Parse builds a credential from them.
	Directive string
	Args      []string
	Parse     func(args []string) (Credential, error)
}

var (
	kindMu sync.RWMutex
	kinds  []Kind
)

// RegisterKind adds credential kinds. Call it from init.
func RegisterKind(ks ...Kind) {
	kindMu.Lock()
	defer kindMu.Unlock()
	for _, k := range ks {
		if slices.ContainsFunc(kinds, func(o Kind) bool { return o.Name == k.Name }) {
			panic("consumers: duplicate credential kind " + k.Name)
		}
		kinds = append(kinds, k)
	}
}

// Kinds lists the registered kinds in registration order.
func Kinds() []Kind {
	kindMu.RLock()
	defer kindMu.RUnlock()
	return slices.Clone(kinds)
}

// KindOf finds a registered kind.
func KindOf(name string) (Kind, bool) {
	kindMu.RLock()
	defer kindMu.RUnlock()
	for _, k := range kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// The registered kind names are the values of the schema enum
// @credential-type.
func init() {
	schema.RegisterEnum("credential-type", func() []string {
		var out []string
		for _, k := range Kinds() {
			out = append(out, k.Name)
		}
		return out
	})
}

// Field is the credential field of JSON name name ("password_hash"), nil
// for an unknown name.
func (c *Credential) Field(name string) *string {
	i, ok := credentialFields[name]
	if !ok {
		return nil
	}
	p, _ := reflect.ValueOf(c).Elem().FieldByIndex(i).Addr().Interface().(*string)
	return p
}

var credentialFields = schema.FieldIndex(reflect.TypeFor[Credential]())

// fieldNames are the JSON names of the credential fields a kind may have.
var fieldNames = []string{"key", "username", "password_hash", "algorithm", "secret", "public_key"}

// Prepare checks c against its kind: a registered type, no field the kind
// does not have, the kind's defaults and rules. It is what every way in
// (API, import, Caddyfile, plain Caddy JSON) runs.
func Prepare(c *Credential) (Kind, error) {
	k, ok := KindOf(c.Type)
	if !ok {
		return k, schema.Errorf("type", "unknown credential type %q", c.Type)
	}
	for _, name := range fieldNames {
		if *c.Field(name) != "" && !slices.Contains(k.Fields, name) {
			return k, schema.Errorf(name, "does not apply to %s credentials", k.Name)
		}
	}
	if k.Normalize != nil {
		k.Normalize(c)
	}
	if k.Check != nil {
		if err := k.Check(c); err != nil {
			return k, err
		}
	}
	return k, nil
}

// RandomKey is a generated key (32 random bytes, hex) for a credential
// created without one.
func RandomKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
