// Package auth holds the gateway's authentication and authorization plugin
// types: key-auth, basic-auth, jwt and acl. Each is a Caddy HTTP handler
// module (http.handlers.gateway_<type>) and a Caddyfile directive of the same
// name.
//
// In the gateway the router puts the compiled consumer table of the running
// config into gwctx.Info.Consumers. Used on its own (a Caddyfile or plain
// Caddy JSON), an auth plugin takes an internal "consumers" list and builds
// its own table from it.
package auth

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// The package's plugin types (each type's struct is in its own file),
// registered in one call (see plugins.Register), and the credential kinds
// they check.
func init() {
	plugins.Register(
		plugins.Type{Name: "key-auth", Ordering: 500, Doc: "The request must carry a consumer's API key (key-auth credential) in one of the key_names headers or query parameters; otherwise 401.", New: func() plugins.Plugin { return new(KeyAuth) }},
		plugins.Type{Name: "basic-auth", Ordering: 510, Doc: "HTTP Basic credentials checked against the consumers' basic-auth credentials (bcrypt password hashes); otherwise 401 with WWW-Authenticate. A successful check is remembered for a minute; at most half the CPUs (at least one) compare passwords at once, the other checks waiting their turn, so that wrong passwords (about 60 ms of a core each, cost 10) cannot take the CPUs of the whole gateway.", New: func() plugins.Plugin { return new(BasicAuth) }},
		plugins.Type{Name: "jwt", Ordering: 520, Doc: "The request must carry a JSON Web Token signed with a consumer's jwt credential, found by the token's key_claim_name claim; the token's algorithm must be the credential's (HS256/HS384/HS512 with its secret, RS256/ES256 with its PEM public key).", New: func() plugins.Plugin { return new(JWT) }},
		plugins.Type{Name: "openid-connect", Ordering: 530, Doc: "Extension (beyond the contract's plugin types): requests carry a bearer token of an OpenID Connect provider, verified against the provider's discovered key set (JWTs: iss, aud, exp, nbf, the provider's asymmetric algorithms only) or its introspection endpoint (opaque tokens), or, unless bearer_only, a browser signs in at the provider (authorization code with PKCE) and gets an encrypted session cookie. The token's consumer_claim maps it to a consumer (username, then custom_id). Invalid tokens are 401 with WWW-Authenticate: Bearer error=\"invalid_token\", missing scopes 403 error=\"insufficient_scope\"; a provider that cannot be reached is 503. Use it at service or route scope.", New: func() plugins.Plugin { return new(OpenIDConnect) }},
		plugins.Type{Name: "acl", Ordering: 600, Doc: "Admits the authenticated consumer by its groups (allow: member of at least one listed group; deny: member of none). Runs after an auth plugin; without an authenticated consumer the answer is 403.", New: func() plugins.Plugin { return new(ACL) }},
	)
	consumers.RegisterKind(keyAuthKind, basicAuthKind, jwtKind)
}

// kindByDirective finds the credential kind of an inline consumer block's
// line.
func kindByDirective(dir string) (consumers.Kind, bool) {
	for _, k := range consumers.Kinds() {
		if k.Directive == dir {
			return k, true
		}
	}
	return consumers.Kind{}, false
}

// inline is the part of the key-auth, basic-auth and jwt plugins that finds
// a request's consumer. In the gateway the router puts the compiled table of
// the running config into gwctx.Info.Consumers; used on its own (a
// Caddyfile or plain Caddy JSON) a plugin takes an internal "consumers"
// list and builds its own table from it.
type inline struct {
	Consumers []consumers.Consumer `json:"consumers,omitempty" schema:"internal"`

	table *consumers.Table
}

// provision checks the plugin p with the admin API's rules and builds the
// inline table (nil when there is no inline list).
func (in *inline) provision(p any) error {
	if err := schema.Check(p); err != nil {
		return err
	}
	if err := checkConsumers(in.Consumers); err != nil {
		return err
	}
	if len(in.Consumers) > 0 {
		in.table = consumers.NewTable(in.Consumers)
	}
	return nil
}

// begin starts identifying the consumer of r: its gateway info and the
// table to look the credential up in (the inline one, else the
// gateway's). The identity headers a client may have sent go in
// authenticated (consumers.SetHeaders), the only way to the upstream.
func (in *inline) begin(r *http.Request) (*gwctx.Info, *http.Request, *consumers.Table) {
	info, r := gwctx.Ensure(r)
	if in.table != nil {
		return info, r, in.table
	}
	return info, r, info.Consumers
}

// authenticated records c as the request's consumer and sets the identity
// headers the upstream receives (client-sent copies are replaced); their
// values live in the gateway's writer when w is it. credential is what
// X-Credential-Identifier says (Kong's values: see
// consumers.HeaderCredential).
func authenticated(w http.ResponseWriter, info *gwctx.Info, h http.Header, c *consumers.Consumer, credential string) {
	info.Consumer = c
	info.Anonymous = false
	rw, _ := w.(*gwctx.RecordingWriter)
	consumers.SetHeaders(h, c, rw.Values(consumers.HeaderValues))
	consumers.SetCredentialHeader(h, credential)
}

// consumerBlock is the "consumer" subdirective of the auth plugins'
// Caddyfile syntax: it reads one inline consumer block (parseConsumer) and
// appends it to the list, numbered by its position there.
func (in *inline) consumerBlock() map[string]func(*caddyfile.Dispenser) error {
	return map[string]func(*caddyfile.Dispenser) error{"consumer": func(d *caddyfile.Dispenser) error {
		c, err := parseConsumer(d, len(in.Consumers)+1)
		if err != nil {
			return err
		}
		in.Consumers = append(in.Consumers, c)
		return nil
	}}
}

// parseConsumer reads one inline consumer block (standalone use):
//
//	consumer <username> {
//	    id        <n>                       # default: position in the list
//	    custom_id <id>
//	    groups    <group...>
//	    key       <api-key>                 # key-auth credential
//	    basic     <username> <bcrypt-hash>  # basic-auth credential
//	    jwt       <key> <alg> <secret|PEM|pem-file>  # jwt credential
//	}
//
// For RS256/ES256 the last jwt argument is the PEM public key itself (a
// heredoc works) or the path of a file holding it.
func parseConsumer(d *caddyfile.Dispenser, n int) (consumers.Consumer, error) {
	c := consumers.Consumer{ID: int64(n)}
	if !d.NextArg() {
		return c, d.ArgErr()
	}
	c.Username = d.Val()
	if d.NextArg() {
		return c, d.ArgErr()
	}
	credID := int64(n) * 1000
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "id":
			var s string
			if !d.Args(&s) {
				return c, d.ArgErr()
			}
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id < 1 {
				return c, d.Errf("consumer id must be a positive integer: %q", s)
			}
			c.ID = id
		case "custom_id":
			var s string
			if !d.Args(&s) {
				return c, d.ArgErr()
			}
			c.CustomID = &s
		case "groups":
			c.Groups = append(c.Groups, d.RemainingArgs()...)
		default:
			k, ok := kindByDirective(d.Val())
			if !ok {
				return c, d.Errf("unrecognized consumer subdirective %q", d.Val())
			}
			args := d.RemainingArgs()
			if len(args) != len(k.Args) {
				return c, d.Errf("%s: want %s", k.Directive, strings.Join(k.Args, " "))
			}
			cr, err := k.Parse(args)
			if err != nil {
				return c, d.Err(err.Error())
			}
			credID++
			cr.ID = credID
			c.Credentials = append(c.Credentials, cr)
		}
	}
	return c, nil
}

// checkConsumers validates an inline consumer list (standalone use).
func checkConsumers(list []consumers.Consumer) error {
	ids := map[int64]bool{}
	for i, c := range list {
		if c.ID < 1 {
			return fmt.Errorf("consumers[%d]: id must be at least 1", i)
		}
		if ids[c.ID] {
			return fmt.Errorf("consumers[%d]: duplicate id %d", i, c.ID)
		}
		ids[c.ID] = true
		if c.Username == "" {
			return fmt.Errorf("consumers[%d]: username is required", i)
		}
		for j := range c.Credentials {
			if _, err := consumers.Prepare(&c.Credentials[j]); err != nil {
				return fmt.Errorf("consumers[%d].credentials[%d]: %w", i, j, err)
			}
		}
	}
	return nil
}

// AnonymousConsumer is the anonymous consumer of the auth plugins (key-auth,
// basic-auth, jwt, openid-connect), as in Kong: a request without
// credentials passes as that consumer, marked X-Anonymous-Consumer: true
// upstream; invalid credentials are still refused. With it, several auth
// plugins on one chain compose as "any of them": a plugin whose
// anonymous is set lets through a request an earlier plugin already
// authenticated with real credentials, and a later plugin may replace
// an earlier one's anonymous consumer with the one its credentials name.
type AnonymousConsumer struct {
	Anonymous string `json:"anonymous" schema:"maxLength=255" doc:"Username (or id) of the consumer a request without credentials passes as, with X-Anonymous-Consumer: true upstream; empty (the default): such a request is refused. Invalid credentials are refused either way. With anonymous set, a request an earlier auth plugin of the chain authenticated passes unchecked, so that several auth plugins on one route accept any one of their credentials. A name that matches no consumer answers 500 (the configuration is wrong), as in Kong."`
}

// authenticatedBefore reports whether this plugin has an anonymous
// consumer and an earlier auth plugin authenticated the request with
// credentials: the plugin then lets it through unchecked.
func (a *AnonymousConsumer) authenticatedBefore(info *gwctx.Info) bool {
	return a.Anonymous != "" && info.Consumer != nil && !info.Anonymous
}

// admitAnonymous serves a request without credentials: as the anonymous
// consumer when there is one (true), else not at all (false: the caller
// answers 401).
func (a *AnonymousConsumer) admitAnonymous(w http.ResponseWriter, r *http.Request, info *gwctx.Info, table *consumers.Table, next caddyhttp.Handler) (bool, error) {
	if a.Anonymous == "" {
		return false, nil
	}
	c := table.ByUsername(a.Anonymous)
	if c == nil {
		if id, err := strconv.ParseInt(a.Anonymous, 10, 64); err == nil {
			c = table.ByID(id)
		}
	}
	if c == nil {
		gwctx.WriteError(w, http.StatusInternalServerError, "anonymous consumer "+strconv.Quote(a.Anonymous)+" not found")
		return true, nil
	}
	authenticated(w, info, r.Header, c, "")
	info.Anonymous = true
	consumers.SetAnonymous(r.Header)
	return true, next.ServeHTTP(w, r)
}
