package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// Upstream headers the openid-connect plugin may send.
const (
	headerUserinfo    = "X-Userinfo"
	headerAccessToken = "X-Access-Token"
	headerIDToken     = "X-ID-Token"
)

// OpenIDConnect is the openid-connect plugin (an extension of the
// contract's plugin types): requests carry a bearer token of an OpenID
// provider, verified against the provider's key set (JWTs) or its
// introspection endpoint (opaque tokens), or, unless bearer_only, a
// browser signs in at the provider (authorization code with PKCE) and
// gets an encrypted session cookie.
type OpenIDConnect struct {
	Issuer           string   `json:"issuer" schema:"required,url,maxLength=2048" doc:"The provider's issuer URL; its discovery document is fetched from <issuer>/.well-known/openid-configuration. https, http only for localhost, 127.0.0.1 or ::1; no credentials, query or fragment. Like every outbound request of the gateway, never one of the gateway's own endpoints."`
	ClientID         string   `json:"client_id" schema:"required,minLength=1,maxLength=512" doc:"The gateway's client id at the provider."`
	ClientSecret     string   `json:"client_secret" schema:"secret,maxLength=1024" doc:"The client's secret: required for the browser sign-in (unless bearer_only) and for introspection. A secret: viewers and exports without secrets see <redacted>. The browser sessions' cookie keys are derived from it, so every node of a cluster reads the sessions of the others, and changing it ends every session."`
	Audiences        []string `json:"audiences" schema:"minLength=1,maxLength=512,maxItems=32" doc:"Accepted aud values of bearer tokens (one of them must be in the token's aud); empty (the default): the client id."`
	ScopesRequired   []string `json:"scopes_required" schema:"minLength=1,maxLength=256,maxItems=32" doc:"Scopes a token must carry (its scope or scp claim, or the scope its introspection or token answer names), all of them; a token without them is 403 with WWW-Authenticate: Bearer error=\"insufficient_scope\"."`
	BearerOnly       bool     `json:"bearer_only" doc:"Only bearer tokens: requests without one are 401 instead of a browser being sent to sign in. Default false."`
	Introspection    bool     `json:"introspection" doc:"Check tokens that are not JWTs (opaque tokens) at the provider's introspection endpoint (RFC 7662, authenticated with client_id and client_secret); answers are cached until the token's exp (at most 5 minutes; an inactive token's for 10 seconds). Default false: opaque tokens are refused."`
	ConsumerClaim    string   `json:"consumer_claim" schema:"minLength=1,maxLength=256" doc:"Claim whose value names the request's consumer: a consumer's username, else its custom_id, so that acl, rate-limit by consumer and the X-Consumer-* headers work. Default sub."`
	ConsumerRequired bool     `json:"consumer_required" doc:"A token whose consumer_claim names no consumer is 403. Default false: the request passes without a consumer."`
	UpstreamHeaders  []string `json:"upstream_headers" schema:"enum=X-Userinfo|X-Access-Token|X-ID-Token,maxItems=3" doc:"Headers sent upstream: X-Userinfo (the token's claims as base64url JSON), X-Access-Token (the access token), X-ID-Token (the ID token of a browser session). Client-sent copies are always removed. Default none."`
	HideCredentials  bool     `json:"hide_credentials" doc:"Remove the Authorization header (and the session cookie) before proxying. Default false (the session cookie is never proxied)."`
	RedirectPath     string   `json:"redirect_path" schema:"path,minLength=2,maxLength=256" doc:"Path of the browser sign-in's callback, under the route's matched path (a route of path /app gets /app/.oidc/callback): <scheme>://<host><route path><redirect_path> is the redirect URI to register at the provider. Default /.oidc/callback."`
	LogoutPath       string   `json:"logout_path" schema:"path,maxLength=256" doc:"Path (under the route's matched path, as redirect_path) that ends the browser session, then sends the browser to the provider's end_session_endpoint when it has one (RP-initiated logout), else answers 200. Empty (the default): none."`
	SessionTTLS      int64    `json:"session_ttl_s" schema:"min=60,max=2592000" doc:"Lifetime of a browser session in seconds (the access token is refreshed before its own expiry while the session lasts). Default 3600."`
	AnonymousConsumer

	plugins.Instance
	inline // standalone use: an inline consumer table

	provider  *provider
	verified  *tokenCache
	audiences []string
	cookies   cookieNames
	aead      sessionCipher
}

// CaddyModule returns the Caddy module information.
func (*OpenIDConnect) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[OpenIDConnect]("openid-connect")
}

// Provision implements caddy.Provisioner. It contacts no provider: a
// provider down must not fail the config load; discovery runs with the
// first request (and is kept across reloads, see providers).
func (o *OpenIDConnect) Provision(caddy.Context) error {
	if err := o.provision(o); err != nil {
		return err
	}
	o.audiences = o.Audiences
	if len(o.audiences) == 0 {
		o.audiences = []string{o.ClientID}
	}
	key := plugins.InstanceKey(o.InstanceID, [2]string{o.Issuer, o.ClientID})
	o.cookies = newCookieNames(key)
	if o.ClientSecret != "" {
		var err error
		if o.aead, err = newSessionCipher(o.ClientSecret, key); err != nil {
			return err
		}
	}
	p, err := holdProvider(o.Issuer)
	if err != nil {
		return err
	}
	o.provider = p
	o.verified = newTokenCache()
	return nil
}

// Cleanup implements caddy.CleanerUpper: the instance releases its
// issuer's state.
func (o *OpenIDConnect) Cleanup() error {
	if o.provider != nil {
		_, _ = providers.Delete(o.provider.issuer)
		o.provider = nil
	}
	return nil
}

// Validate implements caddy.Validator and schema.Validator.
func (o *OpenIDConnect) Validate() error {
	u, err := schema.HTTPURL(o.Issuer)
	if err != nil {
		return schema.Errorf("issuer", "%v", err)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery {
		return schema.Errorf("issuer", "must be an absolute https URL without credentials or query")
	}
	if u.Scheme != "https" && !loopbackHost(u.Hostname()) {
		return schema.Errorf("issuer", "must use https (http only for localhost, 127.0.0.1 or ::1)")
	}
	if !o.BearerOnly && o.ClientSecret == "" {
		return schema.Errorf("client_secret", "is required for the browser sign-in (set bearer_only for bearer tokens only)")
	}
	if o.Introspection && o.ClientSecret == "" {
		return schema.Errorf("client_secret", "is required for introspection")
	}
	if !strings.HasPrefix(o.RedirectPath, "/") || strings.ContainsAny(o.RedirectPath, "?#*{}") {
		return schema.Errorf("redirect_path", "must be a literal path starting with /")
	}
	if o.LogoutPath != "" && (!strings.HasPrefix(o.LogoutPath, "/") || strings.ContainsAny(o.LogoutPath, "?#*{}")) {
		return schema.Errorf("logout_path", "must be empty or a literal path starting with /")
	}
	if o.LogoutPath == o.RedirectPath {
		return schema.Errorf("logout_path", "must differ from redirect_path")
	}
	for i, h := range o.UpstreamHeaders {
		if slices.Index(o.UpstreamHeaders, h) != i {
			return schema.Errorf("upstream_headers["+strconv.Itoa(i)+"]", "is listed twice")
		}
	}
	return nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (o *OpenIDConnect) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info, r, table := o.begin(r)
	for _, h := range [...]string{headerUserinfo, headerAccessToken, headerIDToken} {
		r.Header.Del(h)
	}
	consumers.DeleteLookalikes(r.Header, []string{headerUserinfo, headerAccessToken, headerIDToken})

	if !o.BearerOnly {
		// The paths are the client's: strip_path may have cut the route's
		// path from r.URL already.
		base := strings.TrimSuffix(info.MatchedPath, "/")
		switch originalURL(r).Path {
		case base + o.RedirectPath:
			return o.callback(w, r, base)
		case base + o.LogoutPath:
			if o.LogoutPath != "" {
				return o.logout(w, r)
			}
		}
	}
	if o.authenticatedBefore(info) {
		return next.ServeHTTP(w, r)
	}

	raw, hasBearer := bearerToken(r.Header.Get("Authorization"))
	if hasBearer {
		claims, status, msg := o.checkBearer(r, raw)
		if status != 0 {
			return o.refuse(w, status, msg)
		}
		return o.admit(w, r, info, table, next, claims, raw, "", true)
	}
	if !o.BearerOnly {
		if s := o.readSession(w, r); s != nil {
			if !hasScopes(s.Scope, o.ScopesRequired) {
				return o.refuse(w, http.StatusForbidden, "insufficient_scope")
			}
			o.dropSessionCookie(r)
			return o.admit(w, r, info, table, next, s.Claims, s.AccessToken, s.IDToken, false)
		}
	}
	if ok, err := o.admitAnonymous(w, r, info, table, next); ok {
		return err
	}
	if !o.BearerOnly && wantsHTML(r) {
		return o.signIn(w, r, strings.TrimSuffix(info.MatchedPath, "/"))
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="gateway"`)
	gwctx.WriteError(w, http.StatusUnauthorized, "no bearer token found in request")
	return nil
}

// checkBearer verifies a bearer token: a JWT against the key set, an
// opaque token by introspection (when enabled). status 0: valid.
func (o *OpenIDConnect) checkBearer(r *http.Request, raw string) (map[string]any, int, string) {
	if len(raw) > maxTokenLen {
		return nil, http.StatusUnauthorized, "invalid_token"
	}
	now := time.Now()
	var (
		claims map[string]any
		err    error
	)
	if strings.Count(raw, ".") == 2 {
		key := sha256.Sum256([]byte(raw))
		if claims = o.verified.get(key, now); claims == nil {
			if claims, err = o.provider.verifyJWT(r.Context(), raw, o.audiences, now); err == nil {
				o.verified.put(key, claims, now)
			}
		}
	} else if o.Introspection {
		claims, err = o.provider.introspect(r.Context(), raw, o.ClientID, o.ClientSecret, o.audiences, now)
	} else {
		err = errInvalidToken
	}
	if errors.Is(err, errProviderUnavailable) {
		return nil, http.StatusServiceUnavailable, err.Error()
	}
	if err != nil {
		return nil, http.StatusUnauthorized, "invalid_token"
	}
	if !hasScopes(scopesOf(claims), o.ScopesRequired) {
		return nil, http.StatusForbidden, "insufficient_scope"
	}
	return claims, 0, ""
}

// tokenCache remembers the claims of verified JWTs (by the token's
// SHA-256), so that a client sending the same token on every request
// costs one signature verification per verifiedTTL, not one per request.
// An entry ends at the token's exp or after verifiedTTL, whichever is
// sooner (a key the provider withdrew stops being trusted then); at most
// verifiedCacheSize entries are kept.
type tokenCache struct {
	mu sync.Mutex
	m  map[[32]byte]verifiedToken
}

type verifiedToken struct {
	claims map[string]any
	until  time.Time
}

const (
	verifiedTTL       = time.Minute
	verifiedCacheSize = 10000
)

func newTokenCache() *tokenCache { return &tokenCache{m: map[[32]byte]verifiedToken{}} }

func (c *tokenCache) get(key [32]byte, now time.Time) map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !now.Before(e.until) {
		return nil
	}
	return e.claims
}

func (c *tokenCache) put(key [32]byte, claims map[string]any, now time.Time) {
	until := now.Add(verifiedTTL)
	if exp, present, _ := numericClaim(claims, "exp"); present && exp.Before(until) {
		until = exp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= verifiedCacheSize {
		for k, e := range c.m {
			if !now.Before(e.until) || len(c.m) >= verifiedCacheSize {
				delete(c.m, k)
			}
		}
	}
	c.m[key] = verifiedToken{claims: claims, until: until}
}

// refuse answers 401 invalid_token or 403 insufficient_scope with their
// WWW-Authenticate challenge (RFC 6750), or another status as is.
func (o *OpenIDConnect) refuse(w http.ResponseWriter, status int, msg string) error {
	switch msg {
	case "invalid_token":
		w.Header().Set("WWW-Authenticate", `Bearer realm="gateway", error="invalid_token"`)
		gwctx.WriteError(w, status, "invalid token")
	case "insufficient_scope":
		w.Header().Set("WWW-Authenticate", `Bearer realm="gateway", error="insufficient_scope", scope="`+strings.Join(o.ScopesRequired, " ")+`"`)
		gwctx.WriteError(w, status, "insufficient scope")
	default:
		gwctx.WriteError(w, status, msg)
	}
	return nil
}

// admit maps the claims to a consumer, sets the upstream headers and
// proxies.
func (o *OpenIDConnect) admit(w http.ResponseWriter, r *http.Request, info *gwctx.Info, table *consumers.Table, next caddyhttp.Handler, claims map[string]any, accessToken, idToken string, bearer bool) error {
	var c *consumers.Consumer
	if v := claimString(claims[o.ConsumerClaim]); v != "" {
		if c = table.ByUsername(v); c == nil {
			c = table.ByCustomID(v)
		}
	}
	if c == nil && o.ConsumerRequired {
		gwctx.WriteError(w, http.StatusForbidden, "no consumer for the token's "+o.ConsumerClaim)
		return nil
	}
	if c != nil {
		// The token's subject identifies the credential, as Kong's
		// openid-connect does.
		authenticated(w, info, r.Header, c, claimString(claims["sub"]))
	}
	if bearer && o.HideCredentials {
		r.Header.Del("Authorization")
	}
	for _, h := range o.UpstreamHeaders {
		switch h {
		case headerUserinfo:
			if b, err := json.Marshal(claims); err == nil {
				r.Header.Set(headerUserinfo, base64.RawURLEncoding.EncodeToString(b))
			}
		case headerAccessToken:
			if accessToken != "" {
				r.Header.Set(headerAccessToken, accessToken)
			}
		case headerIDToken:
			if idToken != "" {
				r.Header.Set(headerIDToken, idToken)
			}
		}
	}
	return next.ServeHTTP(w, r)
}

// originalURL is the URL the client asked for, before the router's
// strip_path or any rewrite.
func originalURL(r *http.Request) *url.URL {
	if or, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && or.URL != nil {
		return or.URL
	}
	return r.URL
}

// bearerToken reads "Bearer <token>".
func bearerToken(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		if t := strings.TrimSpace(v[7:]); t != "" {
			return t, true
		}
	}
	return "", false
}

// claimString is a claim's value as a consumer name: a string, or a
// number as written.
func claimString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	}
	return ""
}

// scopesOf reads the scopes of a token's claims: scope (a space-separated
// string, RFC 8693/9068) or scp (a string or an array, as Entra ID and
// Okta send).
func scopesOf(claims map[string]any) []string {
	var out []string
	for _, name := range []string{"scope", "scp"} {
		switch v := claims[name].(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, s := range v {
				if s, ok := s.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func hasScopes(have, want []string) bool {
	for _, s := range want {
		if !slices.Contains(have, s) {
			return false
		}
	}
	return true
}

// wantsHTML reports whether a request comes from a browser navigating:
// a GET or HEAD accepting text/html.
func wantsHTML(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return strings.Contains(strings.ToLower(r.Header.Get("Accept")), "text/html")
}

// SetDefaults implements schema.Defaulter.
func (o *OpenIDConnect) SetDefaults() {
	o.Audiences = []string{}
	o.ScopesRequired = []string{}
	o.BearerOnly = false
	o.Introspection = false
	o.ConsumerClaim = "sub"
	o.ConsumerRequired = false
	o.UpstreamHeaders = []string{}
	o.HideCredentials = false
	o.RedirectPath = "/.oidc/callback"
	o.LogoutPath = ""
	o.SessionTTLS = 3600
	o.Anonymous = ""
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler with the plugins'
// shared syntax (plugins.UnmarshalCaddyfile):
//
//	gateway_openid_connect [<issuer>] {
//	    issuer <url>
//	    client_id <id>
//	    client_secret <secret>
//	    audiences <aud...>
//	    scopes_required <scope...>
//	    bearer_only [true|false]
//	    introspection [true|false]
//	    consumer_claim <claim>
//	    consumer_required [true|false]
//	    upstream_headers <X-Userinfo|X-Access-Token|X-ID-Token...>
//	    hide_credentials [true|false]
//	    redirect_path <path>
//	    logout_path <path>
//	    session_ttl_s <seconds>
//	    anonymous <consumer>
//	    consumer <username> { ... }   # inline consumers, see parseConsumer
//	}
func (o *OpenIDConnect) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugins.UnmarshalCaddyfile(d, o, plugins.Syntax{Args: []string{"issuer"}, Blocks: o.consumerBlock()})
}

// GatesAccess implements plugins.Gate: a proxy-cache never answers
// before it (plugins.Arrange).
func (*OpenIDConnect) GatesAccess() {}

// Interface guards
var (
	_ plugins.Plugin     = (*OpenIDConnect)(nil)
	_ plugins.Gate       = (*OpenIDConnect)(nil)
	_ caddy.CleanerUpper = (*OpenIDConnect)(nil)
)
