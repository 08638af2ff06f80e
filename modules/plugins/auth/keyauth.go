package auth

import (
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// keyAuthKind declares the key-auth credential: a key (generated when
// absent) that is a bearer secret.
var keyAuthKind = consumers.Kind{
	Name:      "key-auth",
	Fields:    []string{"key"},
	Unique:    "key",
	Generated: true,
	Secrets:   func(*consumers.Credential) []string { return []string{"key"} },
	Check: func(c *consumers.Credential) error {
		if c.Key == "" {
			return schema.Errorf("key", "is required")
		}
		return nil
	},
	Directive: "key",
	Args:      []string{"<api-key>"},
	Parse: func(args []string) (consumers.Credential, error) {
		return consumers.Credential{Type: "key-auth", Key: args[0]}, nil
	},
}

// KeyAuth is the key-auth plugin: the request must carry a consumer's API key
// in one of the key_names headers or query parameters.
type KeyAuth struct {
	KeyNames        []string `json:"key_names" schema:"header_name,minLength=1,minItems=1,maxItems=32" doc:"Names looked up as request headers, then as query parameters, for the API key."`
	HideCredentials bool     `json:"hide_credentials" doc:"Remove the key (header or query parameter) before proxying."`
	AnonymousConsumer

	inline // standalone use: an inline consumer table

	// headerKeys are KeyNames in net/http's canonical form, looked up in
	// the header map directly: Header.Get canonicalizes (and, for a name
	// that is not canonical, like the default "apikey", allocates) on
	// every request.
	headerKeys []string
}

// CaddyModule returns the Caddy module information.
func (*KeyAuth) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[KeyAuth]("key-auth") }

// Provision implements caddy.Provisioner.
func (k *KeyAuth) Provision(caddy.Context) error {
	if err := k.provision(k); err != nil {
		return err
	}
	k.headerKeys = make([]string, len(k.KeyNames))
	for i, n := range k.KeyNames {
		k.headerKeys[i] = http.CanonicalHeaderKey(n)
	}
	return nil
}

// Validate implements caddy.Validator (the tags say everything; Provision
// checks them).
func (k *KeyAuth) Validate() error { return nil }

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (k *KeyAuth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info, r, table := k.begin(r)
	if k.authenticatedBefore(info) {
		return next.ServeHTTP(w, r)
	}

	var key, header, param string
	for _, n := range k.headerKeys {
		if v := r.Header[n]; len(v) > 0 && v[0] != "" {
			key, header = v[0], n
			break
		}
	}
	if key == "" {
		q := r.URL.Query()
		for _, n := range k.KeyNames {
			if v := q.Get(n); v != "" {
				key, param = v, n
				break
			}
		}
	}
	if key == "" {
		if ok, err := k.admitAnonymous(w, r, info, table, next); ok {
			return err
		}
		gwctx.WriteError(w, http.StatusUnauthorized, "no API key found in request")
		return nil
	}
	c, cred := table.Lookup("key-auth", key)
	if c == nil {
		gwctx.WriteError(w, http.StatusUnauthorized, "invalid authentication credentials")
		return nil
	}
	if k.HideCredentials {
		if header != "" {
			r.Header.Del(header)
		} else {
			q := r.URL.Query()
			q.Del(param)
			r.URL.RawQuery = q.Encode()
		}
	}
	// The credential's id, as Kong's: never the key, which is the secret.
	authenticated(w, info, r.Header, c, strconv.FormatInt(cred.ID, 10))
	return next.ServeHTTP(w, r)
}

// SetDefaults implements schema.Defaulter.
func (k *KeyAuth) SetDefaults() {
	k.KeyNames = []string{"apikey"}
	k.HideCredentials = false
	k.Anonymous = ""
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler with the plugins'
// shared syntax (plugins.UnmarshalCaddyfile):
//
//	gateway_key_auth [<key_name...>] {
//	    key_names <name...>
//	    hide_credentials [true|false]
//	    anonymous <consumer>
//	    consumer <username> { ... }   # inline consumers, see parseConsumer
//	}
func (k *KeyAuth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugins.UnmarshalCaddyfile(d, k, plugins.Syntax{Args: []string{"key_names"}, Blocks: k.consumerBlock()})
}

// GatesAccess implements plugins.Gate: a proxy-cache never answers
// before it (plugins.Arrange).
func (*KeyAuth) GatesAccess() {}

// Interface guards
var (
	_ plugins.Plugin = (*KeyAuth)(nil)
	_ plugins.Gate   = (*KeyAuth)(nil)
)
