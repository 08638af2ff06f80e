package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// basicAuthKind declares the basic-auth credential: a username (no colon)
// and the bcrypt hash of its password.
var basicAuthKind = consumers.Kind{
	Name:    "basic-auth",
	Fields:  []string{"username", "password_hash"},
	Unique:  "username",
	Secrets: func(*consumers.Credential) []string { return []string{"password_hash"} },
	Check: func(c *consumers.Credential) error {
		switch {
		case c.Username == "":
			return schema.Errorf("username", "is required")
		case strings.Contains(c.Username, ":"):
			return schema.Errorf("username", "must not contain a colon")
		case c.PasswordHash == "":
			return schema.Errorf("password_hash", "is required")
		}
		return nil
	},
	Directive: "basic",
	Args:      []string{"<username>", "<bcrypt-hash>"},
	Parse: func(args []string) (consumers.Credential, error) {
		return consumers.Credential{Type: "basic-auth", Username: args[0], PasswordHash: args[1]}, nil
	},
}

// BasicAuth is the basic-auth plugin: HTTP Basic credentials checked against
// the consumers' basic-auth credentials (bcrypt password hashes).
type BasicAuth struct {
	Realm           string `json:"realm" schema:"minLength=1,maxLength=256" doc:"Realm sent in WWW-Authenticate on 401 answers."`
	HideCredentials bool   `json:"hide_credentials" doc:"Remove the Authorization header before proxying."`
	AnonymousConsumer

	inline // standalone use: an inline consumer table

	cache *verifyCache
}

// CaddyModule returns the Caddy module information.
func (*BasicAuth) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[BasicAuth]("basic-auth") }

// Provision implements caddy.Provisioner.
func (b *BasicAuth) Provision(caddy.Context) error {
	if err := b.provision(b); err != nil {
		return err
	}
	b.cache = newVerifyCache(verifyCacheSize, verifyCacheTTL)
	return nil
}

// Validate implements caddy.Validator and schema.Validator.
func (b *BasicAuth) Validate() error {
	if strings.ContainsAny(b.Realm, `"\`) {
		return schema.Errorf("realm", "must not contain quotes or backslashes (it is sent quoted in WWW-Authenticate)")
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (b *BasicAuth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info, r, table := b.begin(r)
	if b.authenticatedBefore(info) {
		return next.ServeHTTP(w, r)
	}

	user, pass, ok := r.BasicAuth()
	if !ok && !hasScheme(r.Header.Get("Authorization"), "basic") {
		// No Basic credentials at all (another auth plugin's Bearer
		// token is none either): the anonymous consumer, if any.
		if ok, err := b.admitAnonymous(w, r, info, table, next); ok {
			return err
		}
	}
	if !ok {
		return b.deny(w, "missing basic authentication credentials")
	}
	c, cred := table.Lookup("basic-auth", user)
	if cred == nil {
		// Spend the same time as a real check so that response times do
		// not reveal which usernames exist.
		_ = compareHash(r.Context(), fakeHash(), pass)
		return b.deny(w, "invalid authentication credentials")
	}
	if !b.verify(r.Context(), user, pass, cred.PasswordHash) {
		return b.deny(w, "invalid authentication credentials")
	}
	if b.HideCredentials {
		r.Header.Del("Authorization")
	}
	authenticated(w, info, r.Header, c, cred.Username)
	return next.ServeHTTP(w, r)
}

// hasScheme reports whether an Authorization value uses the scheme
// (lower case).
func hasScheme(v, scheme string) bool {
	v = strings.TrimSpace(v)
	return len(v) > len(scheme) && strings.EqualFold(v[:len(scheme)], scheme) && (v[len(scheme)] == ' ' || v[len(scheme)] == '\t')
}

func (b *BasicAuth) deny(w http.ResponseWriter, msg string) error {
	realm := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(b.Realm)
	w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`", charset="UTF-8"`)
	gwctx.WriteError(w, http.StatusUnauthorized, msg)
	return nil
}

// verify checks pass against the bcrypt hash, remembering successes for a
// short while so that a client sending the same credentials on every
// request does not cost a bcrypt computation each time.
func (b *BasicAuth) verify(ctx context.Context, user, pass, hash string) bool {
	cache := b.cache
	if cache == nil { // not provisioned (direct use in Go)
		return compareHash(ctx, []byte(hash), pass)
	}
	k := cache.key(user, pass)
	if cache.get(k, hash) {
		return true
	}
	if !compareHash(ctx, []byte(hash), pass) {
		return false
	}
	cache.put(k, hash)
	return true
}

// bcryptSlots bounds the bcrypt comparisons running at once, in the whole
// process, to half the CPUs (at least one). One comparison is about 60 ms
// of a core (cost 10), and any client can ask for one (a wrong password,
// an unknown user): unbounded, a few dozen such requests a second from a
// client without an account took every CPU of the gateway, from the
// traffic of every route. Beyond the bound, checks wait their turn.
var bcryptSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// compareHash reports whether pass matches the bcrypt hash, comparing
// within bcryptSlots; false when ctx (the client's request) ends first.
func compareHash(ctx context.Context, hash []byte, pass string) bool {
	select {
	case bcryptSlots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-bcryptSlots }()
	return bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil
}

// SetDefaults implements schema.Defaulter.
func (b *BasicAuth) SetDefaults() {
	b.Realm = "gateway"
	b.HideCredentials = false
	b.Anonymous = ""
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler with the plugins'
// shared syntax (plugins.UnmarshalCaddyfile):
//
//	gateway_basic_auth [<realm>] {
//	    realm <realm>
//	    hide_credentials [true|false]
//	    consumer <username> { basic <user> <bcrypt-hash> ... }
//	}
func (b *BasicAuth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugins.UnmarshalCaddyfile(d, b, plugins.Syntax{Args: []string{"realm"}, Blocks: b.consumerBlock()})
}

// ---- verification cache ----

const (
	verifyCacheSize = 4096
	verifyCacheTTL  = time.Minute
)

var (
	fakeOnce sync.Once
	fakeH    []byte
)

// fakeHash is a bcrypt hash (default cost) of a random password, compared
// against when the username is unknown.
func fakeHash() []byte {
	fakeOnce.Do(func() {
		pw := make([]byte, 16)
		_, _ = rand.Read(pw)
		fakeH, _ = bcrypt.GenerateFromPassword(pw, bcrypt.DefaultCost)
	})
	return fakeH
}

// verifyCache remembers successful (user, password) verifications for a
// short TTL. Entries are keyed by an HMAC of user and password under a
// random per-instance key (plaintext passwords are never kept) and remember
// the hash they were verified against, so a changed credential is checked
// again. Size is bounded.
type verifyCache struct {
	mu      sync.Mutex
	hmacKey []byte
	max     int
	ttl     time.Duration
	m       map[[32]byte]verifyEntry
}

type verifyEntry struct {
	hash    string
	expires time.Time
}

func newVerifyCache(max int, ttl time.Duration) *verifyCache {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return &verifyCache{hmacKey: k, max: max, ttl: ttl, m: map[[32]byte]verifyEntry{}}
}

func (c *verifyCache) key(user, pass string) [32]byte {
	m := hmac.New(sha256.New, c.hmacKey)
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(pass))
	var k [32]byte
	copy(k[:], m.Sum(nil))
	return k
}

func (c *verifyCache) get(k [32]byte, hash string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return false
	}
	if time.Now().After(e.expires) {
		delete(c.m, k)
		return false
	}
	return e.hash == hash
}

func (c *verifyCache) put(k [32]byte, hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.m) >= c.max {
		for key, e := range c.m {
			if now.After(e.expires) {
				delete(c.m, key)
			}
		}
		// Still full: drop arbitrary entries (map order is random).
		for key := range c.m {
			if len(c.m) < c.max {
				break
			}
			delete(c.m, key)
		}
	}
	c.m[k] = verifyEntry{hash: hash, expires: now.Add(c.ttl)}
}

func (c *verifyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// GatesAccess implements plugins.Gate: a proxy-cache never answers
// before it (plugins.Arrange).
func (*BasicAuth) GatesAccess() {}

// Interface guards
var (
	_ plugins.Plugin = (*BasicAuth)(nil)
	_ plugins.Gate   = (*BasicAuth)(nil)
)
