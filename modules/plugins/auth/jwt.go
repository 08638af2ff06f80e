package auth

import (
	"crypto/elliptic"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// JWT is the jwt plugin: the request must carry a JSON Web Token signed with
// a consumer's jwt credential. The credential is found by the token's
// key_claim_name claim (iss by default); the token's algorithm must be the
// credential's (HS256, HS384, HS512 with its secret; RS256, ES256 with its
// PEM public key).
type JWT struct {
	HeaderNames        []string `json:"header_names" schema:"header_name,minLength=1,maxItems=32" doc:"Request headers carrying the token as 'Bearer <token>'."`
	QueryNames         []string `json:"query_names" schema:"minLength=1,maxItems=32,maxLength=256" doc:"Query parameters carrying the token."`
	CookieNames        []string `json:"cookie_names" schema:"header_name,minLength=1,maxItems=32" doc:"Cookies carrying the token."`
	KeyClaimName       string   `json:"key_claim_name" schema:"minLength=1,maxLength=256" doc:"Claim whose value selects the consumer's jwt credential (its key): read from the token's payload, else from its (signed) header, as Kong reads it (kid names the header's key id)."`
	ClaimsToVerify     []string `json:"claims_to_verify" schema:"enum=exp|nbf" doc:"Registered claims every token must carry: exp, nbf; a listed claim that is missing is 401, as in Kong. Listed or not, a token that carries exp is refused from that time on, and one that carries nbf before that time (RFC 7519 4.1.4, 4.1.5), give or take leeway_s."`
	MaximumExpirationS int64    `json:"maximum_expiration_s" schema:"min=0,max=315360000" doc:"When above 0, the token must carry exp, must not be expired (whether claims_to_verify lists exp or not), and exp - now must not exceed this many seconds."`
	LeewayS            int64    `json:"leeway_s" schema:"min=0,max=300" doc:"Seconds of clock skew allowed between the gateway and the token's issuer: a token is refused from exp + leeway_s on and before nbf - leeway_s. Default 0 (no skew), as the leeway of Kong's openid-connect and the lifetime_grace_period of APISIX's jwt-auth; at most 300."`
	AnonymousConsumer

	inline // standalone use: an inline consumer table

	parser *jwt.Parser
	keys   sync.Map // PEM text → parsed public key
}

// CaddyModule returns the Caddy module information.
func (*JWT) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[JWT]("jwt") }

// Provision implements caddy.Provisioner.
func (j *JWT) Provision(caddy.Context) error {
	if err := j.provision(j); err != nil {
		return err
	}
	j.parser = newJWTParser()
	return nil
}

func newJWTParser() *jwt.Parser {
	// Time claims are checked by the plugin itself, as configured.
	return jwt.NewParser(jwt.WithoutClaimsValidation(),
		jwt.WithValidMethods(JWTAlgorithms))
}

// Validate implements caddy.Validator and schema.Validator.
func (j *JWT) Validate() error {
	if len(j.HeaderNames)+len(j.QueryNames)+len(j.CookieNames) == 0 {
		return schema.Errorf("header_names", "at least one of header_names, query_names, cookie_names must be non-empty")
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (j *JWT) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info, r, table := j.begin(r)
	if j.authenticatedBefore(info) {
		return next.ServeHTTP(w, r)
	}

	raw := j.token(r)
	if raw == "" {
		if ok, err := j.admitAnonymous(w, r, info, table, next); ok {
			return err
		}
		gwctx.WriteError(w, http.StatusUnauthorized, "no token found in request")
		return nil
	}
	c, cred, msg := j.check(raw, table, time.Now())
	if c == nil {
		gwctx.WriteError(w, http.StatusUnauthorized, msg)
		return nil
	}
	authenticated(w, info, r.Header, c, cred.Key)
	return next.ServeHTTP(w, r)
}

// token finds the raw token: headers (Bearer), then query parameters, then
// cookies, each in configured order.
func (j *JWT) token(r *http.Request) string {
	for _, n := range j.HeaderNames {
		for _, v := range r.Header.Values(n) {
			v = strings.TrimSpace(v)
			if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
				if t := strings.TrimSpace(v[7:]); t != "" {
					return t
				}
			} else if v != "" && !strings.EqualFold(n, "Authorization") && !strings.ContainsAny(v, " \t") {
				return v // a custom header may carry the bare token
			}
		}
	}
	if len(j.QueryNames) > 0 {
		q := r.URL.Query()
		for _, n := range j.QueryNames {
			if v := q.Get(n); v != "" {
				return v
			}
		}
	}
	for _, n := range j.CookieNames {
		if ck, err := r.Cookie(n); err == nil && ck.Value != "" {
			return ck.Value
		}
	}
	return ""
}

var errRejected = errors.New("rejected")

// check verifies raw and returns its consumer and credential, or nil and
// the reason.
func (j *JWT) check(raw string, table *consumers.Table, now time.Time) (*consumers.Consumer, *consumers.Credential, string) {
	parser := j.parser
	if parser == nil {
		parser = newJWTParser()
	}
	var (
		c          *consumers.Consumer
		credential *consumers.Credential
		reason     string
	)
	claims := jwt.MapClaims{}
	_, err := parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		// The payload's claim, else the (signed) JOSE header's of that
		// name, as Kong reads it: key_claim_name kid finds the header's kid.
		v, ok := claims[j.KeyClaimName].(string)
		if _, inClaims := claims[j.KeyClaimName]; !inClaims {
			v, ok = t.Header[j.KeyClaimName].(string)
		}
		if !ok || v == "" {
			reason = fmt.Sprintf("no mandatory '%s' in claims", j.KeyClaimName)
			return nil, errRejected
		}
		cons, cred := table.Lookup("jwt", v)
		if cred == nil {
			reason = fmt.Sprintf("no credentials found for given '%s'", j.KeyClaimName)
			return nil, errRejected
		}
		if t.Method.Alg() != cred.Algorithm { // normalized when the table was compiled
			reason = "invalid algorithm"
			return nil, errRejected
		}
		key, err := j.key(cred)
		if err != nil {
			reason = "invalid key of the jwt credential"
			return nil, errRejected
		}
		c, credential = cons, cred
		return key, nil
	})
	if err != nil {
		if reason != "" {
			return nil, nil, reason
		}
		if errors.Is(err, jwt.ErrTokenSignatureInvalid) {
			return nil, nil, "invalid signature"
		}
		if errors.Is(err, jwt.ErrTokenUnverifiable) || errors.Is(err, jwt.ErrTokenMalformed) {
			return nil, nil, "invalid token"
		}
		return nil, nil, "invalid token"
	}

	exp, err := claims.GetExpirationTime()
	if err != nil {
		return nil, nil, "claim 'exp' must be a number"
	}
	nbf, err := claims.GetNotBefore()
	if err != nil {
		return nil, nil, "claim 'nbf' must be a number"
	}
	// A listed claim is required: a token without exp would never
	// expire, one without nbf would be valid before it was meant to.
	for _, name := range j.ClaimsToVerify {
		if (name == "exp" && exp == nil) || (name == "nbf" && nbf == nil) {
			return nil, nil, "claim '" + name + "' is required"
		}
	}
	// A maximum lifetime bounds nothing without an exp, nor if a token
	// past its exp passed: the consumer signing its own tokens would sign
	// one with an exp long gone, valid for ever (Kong requires exp in
	// claims_to_verify for it).
	if j.MaximumExpirationS > 0 && exp == nil {
		return nil, nil, "claim 'exp' is required"
	}
	// Whoever issued a token with exp or nbf meant it to hold only in
	// that window, listed in claims_to_verify or not.
	leeway := time.Duration(j.LeewayS) * time.Second
	if exp != nil && !now.Before(exp.Add(leeway)) {
		return nil, nil, "token expired"
	}
	if nbf != nil && now.Add(leeway).Before(nbf.Time) {
		return nil, nil, "token not valid yet"
	}
	if j.MaximumExpirationS > 0 {
		if exp.Sub(now) > time.Duration(j.MaximumExpirationS)*time.Second {
			return nil, nil, "token expiration exceeds the maximum allowed"
		}
	}
	return c, credential, ""
}

// JWTAlgorithms are the signing algorithms of jwt credentials: HMAC with
// the credential's secret, RSA and ECDSA P-256 with its public key. They
// are the values of the schema enum @jwt-algorithm.
var JWTAlgorithms = []string{"HS256", "HS384", "HS512", "RS256", "ES256"}

func init() { schema.RegisterEnum("jwt-algorithm", func() []string { return JWTAlgorithms }) }

// hmacAlg tells the algorithms verified with a secret (the others with a
// public key).
func hmacAlg(alg string) bool { return strings.HasPrefix(alg, "HS") }

// jwtKind declares the jwt credential: a key matched against the token's
// key claim, an algorithm (HS256 by default) and a secret or a PEM public
// key.
var jwtKind = consumers.Kind{
	Name:      "jwt",
	Fields:    []string{"key", "algorithm", "secret", "public_key"},
	Unique:    "key",
	Generated: true,
	Secrets: func(c *consumers.Credential) []string {
		if hmacAlg(c.Algorithm) {
			return []string{"secret"}
		}
		return nil
	},
	Normalize: func(c *consumers.Credential) {
		if c.Algorithm == "" {
			c.Algorithm = "HS256"
		}
	},
	Check: func(c *consumers.Credential) error {
		if holdsPrivateKey(c.PublicKey) {
			// Only the first PEM block is read, so a pasted key pair
			// passed, and answers (to viewers too) and exports without
			// secrets show public_key whole.
			return schema.Errorf("public_key", "holds a private key: give only the public key (public_key is shown in answers)")
		}
		_, err := verificationKey(c)
		return err
	},
	Directive: "jwt",
	Args:      []string{"<key>", "<algorithm>", "<secret|PEM|pem-file>"},
	Parse: func(args []string) (consumers.Credential, error) {
		c := consumers.Credential{Type: "jwt", Key: args[0], Algorithm: args[1]}
		if !slices.Contains(JWTAlgorithms, args[1]) {
			return c, fmt.Errorf("unsupported jwt algorithm %q (%s)", args[1], strings.Join(JWTAlgorithms, ", "))
		}
		if hmacAlg(args[1]) {
			c.Secret = args[2]
			return c, nil
		}
		material := args[2]
		if !strings.Contains(material, "-----BEGIN") {
			b, err := os.ReadFile(material)
			if err != nil {
				return c, fmt.Errorf("reading public key: %v", err)
			}
			material = string(b)
		}
		c.PublicKey = material
		return c, nil
	},
}

// key returns the verification key of a credential, parsing (and
// remembering) PEM public keys.
func (j *JWT) key(cr *consumers.Credential) (any, error) {
	if hmacAlg(cr.Algorithm) {
		return verificationKey(cr)
	}
	if k, ok := j.keys.Load(cr.PublicKey); ok {
		return k, nil
	}
	k, err := verificationKey(cr)
	if err != nil {
		return nil, err
	}
	j.keys.Store(cr.PublicKey, k)
	return k, nil
}

// verificationKey is the key jwt verifies signatures of cr (normalized)
// with; its errors name the credential field at fault.
func verificationKey(cr *consumers.Credential) (any, error) {
	alg := cr.Algorithm
	if !slices.Contains(JWTAlgorithms, alg) {
		return nil, schema.Errorf("algorithm", "must be one of %s", strings.Join(JWTAlgorithms, ", "))
	}
	if hmacAlg(alg) {
		if cr.Secret == "" {
			return nil, schema.Errorf("secret", "is required for %s", alg)
		}
		if cr.PublicKey != "" {
			return nil, schema.Errorf("public_key", "does not apply to %s (use secret)", alg)
		}
		return []byte(cr.Secret), nil
	}
	if cr.PublicKey == "" {
		return nil, schema.Errorf("public_key", "is required for %s", alg)
	}
	if cr.Secret != "" {
		return nil, schema.Errorf("secret", "does not apply to %s (use public_key)", alg)
	}
	if alg == "RS256" {
		k, err := jwt.ParseRSAPublicKeyFromPEM([]byte(cr.PublicKey))
		if err != nil {
			return nil, schema.Errorf("public_key", "must be a PEM-encoded RSA public key (PKIX, PKCS#1 or a certificate)")
		}
		// crypto/rsa verifies with no key under 1024 bits: every token
		// would be refused. RFC 7518 (3.3) asks for 2048 or more.
		if n := k.N.BitLen(); n < 1024 {
			return nil, schema.Errorf("public_key", "is a %d-bit RSA key; RS256 needs at least 1024 bits (2048 or more recommended)", n)
		}
		return k, nil
	}
	k, err := jwt.ParseECPublicKeyFromPEM([]byte(cr.PublicKey))
	if err != nil {
		return nil, schema.Errorf("public_key", "must be a PEM-encoded ECDSA public key (PKIX or a certificate)")
	}
	if k.Curve != elliptic.P256() {
		return nil, schema.Errorf("public_key", "ES256 needs an ECDSA P-256 key")
	}
	return k, nil
}

// holdsPrivateKey reports whether a PEM text has a private key in it (a
// block's type or armor line, whole or not: a public key never says
// PRIVATE KEY).
func holdsPrivateKey(text string) bool { return strings.Contains(text, "PRIVATE KEY") }

// SetDefaults implements schema.Defaulter.
func (j *JWT) SetDefaults() {
	j.HeaderNames = []string{"Authorization"}
	j.QueryNames = []string{"jwt"}
	j.CookieNames = []string{}
	j.KeyClaimName = "iss"
	j.ClaimsToVerify = []string{"exp"}
	j.MaximumExpirationS = 0
	j.Anonymous = ""
	j.LeewayS = 0
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler with the plugins'
// shared syntax (plugins.UnmarshalCaddyfile):
//
//	gateway_jwt {
//	    header_names <name...>         # give no names for none
//	    query_names <name...>
//	    cookie_names <name...>
//	    key_claim_name <claim>
//	    claims_to_verify <exp|nbf...>
//	    maximum_expiration_s <seconds>
//	    leeway_s <seconds>
//	    consumer <username> { jwt <key> <alg> <secret|PEM|pem-file> ... }
//	}
func (j *JWT) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugins.UnmarshalCaddyfile(d, j, plugins.Syntax{Blocks: j.consumerBlock()})
}

// GatesAccess implements plugins.Gate: a proxy-cache never answers
// before it (plugins.Arrange).
func (*JWT) GatesAccess() {}

// Interface guards
var (
	_ plugins.Plugin = (*JWT)(nil)
	_ plugins.Gate   = (*JWT)(nil)
)
