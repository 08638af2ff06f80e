package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

const (
	ssoStateTTL     = 10 * time.Minute
	ssoMaxPending   = 10000 // pending sign-ins kept at most (oldest dropped)
	ssoBindCookie   = guard.SSOCookie
	ssoCallbackPath = "/api/v1/auth/sso/callback"
	ssoDefaultLabel = "Sign in with SSO"
	providerTTL     = time.Hour
	// ssoMaxHost is the longest Host a redirect URI is built from (without
	// public_url): a 253-character name, brackets and a port. Each pending
	// sign-in stores its redirect URI, and an anonymous client chose it:
	// an IPv6 literal takes a zone of any length ([::1%aaaa…]), so up to
	// the admin listener's header limit per row (64 KiB; Go's 1 MB before),
	// 640 MB for the ssoMaxPending rows.
	ssoMaxHost      = 261
	oidcHTTPTimeout = 10 * time.Second
)

// SsoConfig is the OpenID Connect configuration: the declaration of the
// input (SsoConfigInput) and of the redacted config in answers.
type SsoConfig struct {
	Issuer            string   `json:"issuer" schema:"required,url,minLength=1" doc:"The OpenID provider's issuer URL (discovery at /.well-known/openid-configuration). HTTPS; plain HTTP only for localhost, 127.0.0.1 and ::1."`
	ClientID          string   `json:"client_id" schema:"required,minLength=1"`
	ClientSecret      *string  `json:"client_secret,omitempty" schema:"writeonly" doc:"Never answered. Omitted or null keeps the stored one; an empty string removes it (public client, PKCE only)."`
	ClientSecretSet   bool     `json:"client_secret_set" schema:"readonly"`
	Label             string   `json:"label" schema:"name,maxLength=100" doc:"The sign-in button label."`
	AutoProvisionRole *string  `json:"auto_provision_role" schema:"enum=viewer|editor|admin" doc:"viewer, editor, admin or null: the role of users created at their first SSO sign-in; null: only pre-created users (matched by email) may sign in."`
	AllowedDomains    []string `json:"allowed_domains" schema:"host,maxItems=100" doc:"E-mail domains eligible for auto-provisioning (exact, ignoring the case of ASCII letters); empty: any."`
}

// SetDefaults implements schema.Defaulter.
func (s *SsoConfig) SetDefaults() {
	s.Label = ssoDefaultLabel
	s.AllowedDomains = []string{}
}

// Validate implements schema.Validator.
func (s *SsoConfig) Validate() error {
	u, err := schema.HTTPURL(s.Issuer)
	if err != nil {
		return schema.Errorf("issuer", "%v", err)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery {
		return schema.Errorf("issuer", "must be an absolute https URL without credentials or query")
	}
	if u.Scheme != "https" && !isLocalhost(u.Hostname()) {
		return schema.Errorf("issuer", "must use https (http only for localhost, 127.0.0.1 or ::1)")
	}
	if r := s.AutoProvisionRole; r != nil && *r != "viewer" && *r != "editor" && *r != "admin" {
		return schema.Errorf("auto_provision_role", "must be one of viewer, editor, admin, or null")
	}
	if s.AllowedDomains == nil {
		s.AllowedDomains = []string{}
	}
	for i, d := range s.AllowedDomains {
		if d == "" || strings.ContainsAny(d, "@/ \t:") {
			return schema.Errorf("allowed_domains["+strconv.Itoa(i)+"]", "must be an e-mail domain such as example.com")
		}
	}
	return nil
}

func isLocalhost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && (ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback))
}

// SsoStatus is the answer of the SSO configuration endpoints.
type SsoStatus struct {
	Enabled bool       `json:"enabled"`
	Config  *SsoConfig `json:"config"`
}

func ssoView(cfg *storage.SSOConfig) *SsoStatus {
	if cfg == nil {
		return &SsoStatus{}
	}
	domains := cfg.AllowedDomains
	if domains == nil {
		domains = []string{}
	}
	return &SsoStatus{Enabled: true, Config: &SsoConfig{
		Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecretSet: cfg.ClientSecret != "",
		Label: cfg.Label, AutoProvisionRole: cfg.AutoProvisionRole, AllowedDomains: domains,
	}}
}

func loadSSOConfig(db *gorm.DB) (*storage.SSOConfig, error) {
	var rows []storage.SSOConfig
	if err := db.Where("id = ?", 1).Limit(1).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading SSO configuration: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &rows[0], nil
}

const ssoFlowDoc = "OpenID Connect authorization code flow with PKCE (S256). The redirect_uri is settings.public_url + /api/v1/auth/sso/callback (the request's own origin when public_url is empty); it must be registered with the provider. " +
	"State, nonce and PKCE verifier are kept server-side for 10 minutes and are single-use; the state is also bound to the browser that started the flow by a short-lived HttpOnly cookie gateway_sso (SameSite=Lax, Path=/api/v1/auth/sso/), so a callback URL cannot be replayed in another browser (login CSRF). Sign-ins started in one browser while one is pending (two tabs) share its binding, and each completes; the cookie expires with the states rather than being cleared by a callback."

func ssoEndpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/sso/config", Role: api.RoleAdmin, Tag: "sso",
			Summary: "The SSO configuration (client secret redacted)", Response: SsoStatus{}, Handle: getSSO},
		{Method: "PUT", Path: "/api/v1/sso/config", Role: api.RoleAdmin, Tag: "sso",
			Summary: "Configure SSO (OpenID Connect)",
			Description: "Full replacement, except client_secret: omitted keeps the stored one. The issuer is not contacted here; discovery happens at sign-in. " +
				"A change of issuer or client_id unlinks every account from its provider identity (see the callback): each is linked again, by email, at its next sign-in. " +
				"A callback in progress, which read the configuration before, fails as not_configured. " +
				ssoFlowDoc + " " + csrfRule,
			Body: SsoConfig{}, Response: SsoStatus{}, Statuses: []int{400}, Handle: putSSO},
		{Method: "DELETE", Path: "/api/v1/sso/config", Role: api.RoleAdmin, Tag: "sso",
			Summary:     "Disable SSO",
			Description: "Answers {enabled: false, config: null}; pending sign-ins are dropped (a callback already in progress fails as not_configured), the sessions opened by SSO end (password sessions stay) and accounts are unlinked from their provider identities. SSO-only accounts cannot sign in until they get a password. " + csrfRule,
			Response:    SsoStatus{}, Handle: deleteSSO},
		{Method: "GET", Path: "/api/v1/auth/sso/start", Role: api.RolePublic, Tag: "auth",
			Summary:     "Start an SSO sign-in (browser navigation; public)",
			Description: "303 to the provider's authorization endpoint with state, nonce and code_challenge (S256). 400 {error} when SSO is not configured, or when settings.public_url is empty and the request's Host (which the redirect URI is then built from) is longer than " + strconv.Itoa(ssoMaxHost) + " characters; 500 when the provider's discovery document cannot be read. " + ssoFlowDoc,
			// 500 (and 503 when the database is unreachable) as for
			// authenticated endpoints: the specification lists 500.
			Statuses: []int{303, 400, 500, 503}, Raw: ssoStart},
		{Method: "GET", Path: ssoCallbackPath, Role: api.RolePublic, Tag: "auth",
			Summary: "SSO callback from the provider (public)",
			Description: "Exchanges the code with the PKCE verifier, verifies the id_token with the provider's keys (signature, issuer, audience = client_id, expiry) and its nonce, then signs the user in (session cookie) and answers 303 to /. " +
				"The account is the one linked to the token's sub (the provider identity), whatever email the token now carries. Otherwise it is matched by email, ignoring the case of ASCII letters only (an address that equals an account's only by Unicode case folding, such as the Kelvin sign for k, is not_provisioned), " +
				"and linked to the sub: an account linked to another identity at the provider is refused (identity_mismatch), so once an account has signed in through SSO, a provider identity merely claiming its email cannot. " +
				"Changing the account's email, or the SSO issuer or client_id, unlinks it. Unknown users are created (and linked) only when auto_provision_role is set and their email domain is in allowed_domains (when not empty). " +
				"An email_verified claim that is false is refused. SSO disabled or its configuration replaced (DELETE or PUT /api/v1/sso/config) while a callback is in progress, after it read the configuration, makes it fail as not_configured: it provisions, links and signs in no one. Every failure answers 303 to /?sso_error=<reason>, reason one of: " +
				"provider error code (e.g. access_denied), invalid_state, not_configured, provider_unavailable, missing_code, exchange_failed, missing_id_token, invalid_id_token, id_token_expired, nonce_mismatch, email_missing, email_not_verified, not_provisioned, domain_not_allowed, identity_mismatch, server_error. " + sessionDoc,
			Query: []api.QueryParam{
				{Name: "code", Type: "string"}, {Name: "state", Type: "string"},
				{Name: "error", Type: "string"}, {Name: "error_description", Type: "string"},
			},
			Statuses: []int{303}, Raw: ssoCallback},
	}
}

func getSSO(c *api.Call) (any, error) {
	cfg, err := loadSSOConfig(svc(c).db(c.Ctx()))
	if err != nil {
		return nil, err
	}
	return ssoView(cfg), nil
}

func putSSO(c *api.Call) (any, error) {
	in := &SsoConfig{}
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	s := svc(c)
	db := s.db(c.Ctx())
	var out *storage.SSOConfig
	err := db.Transaction(func(tx *gorm.DB) error {
		old, err := loadSSOConfig(tx)
		if err != nil {
			return err
		}
		row := &storage.SSOConfig{ID: 1, Issuer: in.Issuer, ClientID: in.ClientID, Label: in.Label,
			AutoProvisionRole: in.AutoProvisionRole, AllowedDomains: in.AllowedDomains, UpdatedAt: time.Now().UTC()}
		switch {
		case in.ClientSecret != nil:
			row.ClientSecret = *in.ClientSecret
		case old != nil:
			row.ClientSecret = old.ClientSecret
		}
		if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, UpdateAll: true}).Create(row).Error; err != nil {
			return err
		}
		if old != nil && (old.Issuer != row.Issuer || old.ClientID != row.ClientID) {
			// A sub is the provider's (and with pairwise subjects the
			// client's): links to another provider's identities mean
			// nothing here. Accounts are linked again at their next
			// sign-in, by email.
			if err := unlinkAll(tx); err != nil {
				return err
			}
		}
		out = row
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storing SSO configuration: %w", err)
	}
	s.oidc.forget()
	return ssoView(out), nil
}

func deleteSSO(c *api.Call) (any, error) {
	s := svc(c)
	db := s.db(c.Ctx())
	err := db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ?", 1).Delete(&storage.SSOConfig{}).Error; err != nil {
			return err
		}
		// The sessions SSO opened end with it: an administrator disabling
		// SSO (a compromised or retired provider) must not leave the
		// provider's sign-ins valid for days. Password sessions stay.
		if err := tx.Where("method = ?", "sso").Delete(&storage.AdminSession{}).Error; err != nil {
			return err
		}
		if err := unlinkAll(tx); err != nil {
			return err
		}
		return tx.Where("1 = 1").Delete(&storage.SSOState{}).Error
	})
	if err != nil {
		return nil, fmt.Errorf("deleting SSO configuration: %w", err)
	}
	s.oidc.forget()
	return &SsoStatus{}, nil
}

// unlinkAll forgets every account's link to a provider identity.
func unlinkAll(tx *gorm.DB) error {
	return tx.Model(&storage.AdminUser{}).Where("sso_subject IS NOT NULL").Update("sso_subject", nil).Error
}

// ---- provider discovery ----

// oidcMaxAnswer bounds every answer of the provider that the gateway reads:
// go-oidc reads the discovery document and the key set whole (io.ReadAll),
// and a provider streaming an endless body would otherwise have up to
// oidcHTTPTimeout's worth of it held in memory, per request. The bound is
// golang.org/x/oauth2's on token answers; real discovery documents and key
// sets are a few KiB.
const oidcMaxAnswer = 1 << 20

var errAnswerTooLarge = fmt.Errorf("the provider's answer is larger than %d bytes", oidcMaxAnswer)

type providerCache struct {
	mu     sync.Mutex
	m      map[string]cachedProvider // by issuer
	flight map[string]*discovery     // by issuer and stored: the discovery under way
	gen    uint64                    // forget's count: a discovery started before it is not cached
	client *http.Client
}

type cachedProvider struct {
	p      *oidc.Provider
	at     time.Time
	stored time.Time // the configuration's UpdatedAt it was discovered for
}

// discovery is one discovery request, shared by the sign-ins that need it
// while it runs: done is closed when p or err is set.
type discovery struct {
	done chan struct{}
	p    *oidc.Provider
	err  error
}

func newProviderCache() *providerCache {
	return &providerCache{m: map[string]cachedProvider{}, flight: map[string]*discovery{}, client: newOIDCClient()}
}

// newOIDCClient is the HTTP client of discovery, the code exchange and
// the key set. Their URLs are the provider's (its discovery document
// names the token endpoint and the key set), fetched at the request of
// anonymous browsers: like every other outbound client of the gateway,
// it dials through package guard, so that no provider (malicious,
// compromised, or an issuer mistyped) gets the gateway to send a request
// to its own admin API or Caddy's admin endpoint (which has no
// authentication: POST /stop ends the process), whatever its names
// resolve to or redirect to. Answers are bounded (oidcMaxAnswer). The
// environment's proxy settings still apply, as to the http-log sender's
// client: a provider may only be reachable through one.
func newOIDCClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = guard.Dialer(&net.Dialer{Timeout: oidcHTTPTimeout, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Timeout: oidcHTTPTimeout, Transport: boundedAnswers{tr}}
}

// boundedAnswers makes every answer's body fail once it goes past
// oidcMaxAnswer bytes (after decompression: the transport inflates gzip).
type boundedAnswers struct{ rt http.RoundTripper }

func (b boundedAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: oidcMaxAnswer}
	return resp, nil
}

type boundedBody struct {
	io.ReadCloser
	left int64 // bytes still allowed; -1 once over
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errAnswerTooLarge
	}
	// One byte more than allowed tells an answer of exactly the bound
	// from a longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, errAnswerTooLarge
	}
	return n, err
}

// ctx carries the HTTP client (with its timeout) for go-oidc and oauth2.
func (pc *providerCache) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, pc.client)
}

// get is the provider of cfg's issuer: cached for providerTTL, else
// discovered. A provider discovered for an earlier version of the stored
// configuration (cfg.UpdatedAt) is discovered again: the configuration
// may have been stored by another node of a cluster, whose forget never
// ran here, to fix the provider. Sign-ins needing a discovery while one
// of the same issuer and configuration is under way wait for that one
// (until their own request ends) rather than each queueing for its own
// in turn: start and callback are public, and a provider slow to fail
// would otherwise hold every waiting request for the sum of their delays.
func (pc *providerCache) get(ctx context.Context, cfg *storage.SSOConfig) (*oidc.Provider, error) {
	issuer, stored := cfg.Issuer, cfg.UpdatedAt
	pc.mu.Lock()
	if e, ok := pc.m[issuer]; ok && e.stored.Equal(stored) && time.Since(e.at) < providerTTL {
		pc.mu.Unlock()
		return e.p, nil
	}
	key := issuer + "\x00" + stored.UTC().Format(time.RFC3339Nano)
	d, ok := pc.flight[key]
	if !ok {
		d = &discovery{done: make(chan struct{})}
		pc.flight[key] = d
		go pc.discover(issuer, stored, key, d, pc.gen)
	}
	pc.mu.Unlock()
	select {
	case <-d.done:
		return d.p, d.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the SSO provider's discovery: %w", ctx.Err())
	}
}

// discover runs d (the flight under key), bounded by oidcHTTPTimeout
// whoever waits for it, and caches its provider unless the configuration
// was stored meanwhile (forget).
func (pc *providerCache) discover(issuer string, stored time.Time, key string, d *discovery, gen uint64) {
	ctx, cancel := context.WithTimeout(pc.ctx(context.Background()), oidcHTTPTimeout)
	defer cancel()
	d.p, d.err = oidc.NewProvider(ctx, issuer)
	pc.mu.Lock()
	if pc.flight[key] == d {
		delete(pc.flight, key)
	}
	if d.err == nil && pc.gen == gen {
		pc.m[issuer] = cachedProvider{p: d.p, at: time.Now(), stored: stored}
	}
	pc.mu.Unlock()
	close(d.done)
}

// forget drops the cached providers: the next sign-in discovers again,
// without joining a discovery started before (the administrator may just
// have fixed the provider).
func (pc *providerCache) forget() {
	pc.mu.Lock()
	pc.m = map[string]cachedProvider{}
	pc.flight = map[string]*discovery{}
	pc.gen++
	pc.mu.Unlock()
}

func oauthConfig(cfg *storage.SSOConfig, p *oidc.Provider, redirectURI string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		Endpoint: p.Endpoint(), RedirectURL: redirectURI,
		Scopes: []string{oidc.ScopeOpenID, "email", "profile"},
	}
}

// callbackURL is public_url + the callback path, or the request's own
// origin + the callback path when public_url is empty (400 when its Host
// is longer than ssoMaxHost).
func callbackURL(db *gorm.DB, r *http.Request) (string, error) {
	base := strings.TrimRight(settingsRow(db).PublicURL, "/")
	if base == "" {
		if len(r.Host) > ssoMaxHost {
			return "", api.BadRequest(fmt.Sprintf("Host: longer than %d characters; the SSO redirect URI is built from it (set settings.public_url)", ssoMaxHost))
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + ssoCallbackPath, nil
}

// ---- start ----

func ssoStart(c *api.Call) {
	s := svc(c)
	db := s.db(c.Ctx())
	cfg, err := loadSSOConfig(db)
	if err != nil {
		c.Fail(err)
		return
	}
	if cfg == nil {
		c.Fail(api.BadRequest("SSO is not configured"))
		return
	}
	prov, err := s.oidc.get(c.Ctx(), cfg)
	if err != nil {
		c.CP.Logger().Warn("SSO provider discovery failed", zap.String("issuer", cfg.Issuer), zap.Error(err))
		c.Fail(&api.APIError{Status: http.StatusInternalServerError, Msg: "the SSO provider's discovery document could not be read"})
		return
	}
	state, err1 := randomToken(32)
	nonce, err2 := randomToken(32)
	// A browser with a sign-in pending keeps its binding: a new one would
	// make the pending sign-in (another tab, a double click) fail. The
	// binding only ties states to the browser; each state stays single-use.
	binding, err3 := "", error(nil)
	if bc := c.R.CookiesNamed(ssoBindCookie); len(bc) == 1 && isBinding(bc[0].Value) {
		binding = bc[0].Value
	} else {
		binding, err3 = randomToken(32)
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		c.Fail(err)
		return
	}
	verifier := oauth2.GenerateVerifier()
	redirectURI, err := callbackURL(db, c.R)
	if err != nil {
		c.Fail(err)
		return
	}
	now := time.Now().UTC()
	row := storage.SSOState{StateHash: sha256Hex(state), BindingHash: sha256Hex(binding), Nonce: nonce,
		Verifier: verifier, RedirectURI: redirectURI, CreatedAt: now, ExpiresAt: now.Add(ssoStateTTL)}
	err = db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("expires_at <= ?", now).Delete(&storage.SSOState{}).Error; err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&storage.SSOState{}).Count(&n).Error; err != nil {
			return err
		}
		if n >= ssoMaxPending {
			// Unauthenticated callers can start sign-ins: keep the table
			// bounded by dropping the oldest pending ones.
			sub := tx.Model(&storage.SSOState{}).Select("id").Order("id").Limit(int(n - ssoMaxPending + 1))
			if err := tx.Where("id IN (?)", sub).Delete(&storage.SSOState{}).Error; err != nil {
				return err
			}
		}
		return tx.Create(&row).Error
	})
	if err != nil {
		c.Fail(fmt.Errorf("storing SSO state: %w", err))
		return
	}
	http.SetCookie(c.W, &http.Cookie{Name: ssoBindCookie, Value: binding, Path: "/api/v1/auth/sso/",
		MaxAge: int(ssoStateTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureCookie(db)})
	target := oauthConfig(cfg, prov, redirectURI).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
	c.W.Header().Set("Cache-Control", "no-store")
	http.Redirect(c.W, c.R, target, http.StatusSeeOther)
}

// isBinding tells whether v has the form of a binding randomToken(32)
// makes (43 characters of unpadded base64url).
func isBinding(v string) bool {
	if len(v) != 43 {
		return false
	}
	for _, c := range []byte(v) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ---- callback ----

// takeState consumes a pending sign-in: it is deleted whatever happens
// next (single use); nil when unknown, already used or expired.
func takeState(db *gorm.DB, state string) (*storage.SSOState, error) {
	if state == "" {
		return nil, nil
	}
	var rows []storage.SSOState
	if err := db.Where("state_hash = ?", sha256Hex(state)).Limit(1).Find(&rows).Error; err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, nil
	}
	res := db.Where("id = ?", rows[0].ID).Delete(&storage.SSOState{})
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected != 1 || !time.Now().Before(rows[0].ExpiresAt) {
		return nil, nil // consumed by a concurrent callback, or expired
	}
	return &rows[0], nil
}

var errorCode = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

type ssoClaims struct {
	Email         string `json:"email"`
	EmailVerified any    `json:"email_verified"`
	Name          string `json:"name"`
}

// verified: a missing claim counts as verified (not every provider sends
// it); false, "false" or anything else but true is unverified.
func (cl *ssoClaims) verified() bool {
	switch v := cl.EmailVerified.(type) {
	case nil:
		return true
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true")
	}
	return false
}

func ssoCallback(c *api.Call) {
	s := svc(c)
	ctx := c.Ctx()
	db := s.db(ctx)
	log := c.CP.Logger().Named("sso")
	// The binding cookie is left to expire (ssoStateTTL), not cleared: it
	// binds the browser's other pending sign-ins too, and clearing it at
	// a made-up callback (any page can navigate the browser there) would
	// abort the sign-in under way.
	fail := func(reason string, err error) {
		fields := []zap.Field{zap.String("reason", reason)}
		if err != nil {
			fields = append(fields, zap.Error(err))
		}
		log.Info("SSO sign-in failed", fields...)
		c.W.Header().Set("Cache-Control", "no-store")
		http.Redirect(c.W, c.R, "/?sso_error="+url.QueryEscape(reason), http.StatusSeeOther)
	}
	q := c.R.URL.Query()
	st, err := takeState(db, q.Get("state"))
	if err != nil {
		fail("server_error", err)
		return
	}
	if e := q.Get("error"); e != "" {
		if !errorCode.MatchString(e) {
			e = "provider_error"
		}
		fail(e, nil)
		return
	}
	if st == nil {
		fail("invalid_state", nil)
		return
	}
	// One binding cookie only: another of a longer Path or a parent
	// Domain would be a page's on this host name (login CSRF).
	bc := c.R.CookiesNamed(ssoBindCookie)
	if len(bc) != 1 || subtle.ConstantTimeCompare([]byte(sha256Hex(bc[0].Value)), []byte(st.BindingHash)) != 1 {
		fail("invalid_state", errors.New("the state was not started by this browser"))
		return
	}
	cfg, err := loadSSOConfig(db)
	if err != nil {
		fail("server_error", err)
		return
	}
	if cfg == nil {
		fail("not_configured", nil)
		return
	}
	code := q.Get("code")
	if code == "" {
		fail("missing_code", nil)
		return
	}
	prov, err := s.oidc.get(ctx, cfg)
	if err != nil {
		fail("provider_unavailable", err)
		return
	}
	octx, cancel := context.WithTimeout(s.oidc.ctx(ctx), oidcHTTPTimeout)
	defer cancel()
	tok, err := oauthConfig(cfg, prov, st.RedirectURI).Exchange(octx, code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		fail("exchange_failed", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		fail("missing_id_token", nil)
		return
	}
	idt, err := prov.Verifier(&oidc.Config{ClientID: cfg.ClientID}).Verify(octx, raw)
	if err != nil {
		var te *oidc.TokenExpiredError
		if errors.As(err, &te) {
			fail("id_token_expired", err)
		} else {
			fail("invalid_id_token", err)
		}
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		fail("nonce_mismatch", nil)
		return
	}
	var cl ssoClaims
	if err := idt.Claims(&cl); err != nil {
		fail("invalid_id_token", err)
		return
	}
	// The users' endpoints' bound (User.Email): a longer one would make
	// an account whose answer they refuse.
	if cl.Email == "" || len(cl.Email) > 254 || validEmail(cl.Email) != nil {
		fail("email_missing", nil)
		return
	}
	if !cl.verified() {
		fail("email_not_verified", nil)
		return
	}
	if idt.Subject == "" {
		fail("invalid_id_token", errors.New("the id_token has no sub claim"))
		return
	}
	// The account is found, linked or provisioned in the session's
	// transaction, after the configuration read above is checked to be
	// still the current one: SSO disabled or reconfigured during the
	// exchange leaves no account, link or session behind.
	u, err := startSessionWith(db, c.W, c.R, "sso", func(tx *gorm.DB) (*storage.AdminUser, error) {
		if err := checkSSOConfig(tx, cfg); err != nil {
			return nil, err
		}
		u, reason, err := ssoUser(tx, cfg, idt.Subject, &cl)
		if reason != "" {
			return nil, &ssoRefusal{reason: reason, err: err}
		}
		return u, nil
	})
	var refused *ssoRefusal
	switch {
	case errors.As(err, &refused):
		fail(refused.reason, refused.err)
		return
	case errors.Is(err, errSSOConfigChanged):
		// As if the configuration had been gone when the callback read it.
		fail("not_configured", err)
		return
	case errors.Is(err, errCredentialChanged):
		fail("not_provisioned", err)
		return
	case err != nil:
		fail("server_error", err)
		return
	}
	log.Info("SSO sign-in", zap.Int64("user_id", u.ID))
	c.W.Header().Set("Cache-Control", "no-store")
	http.Redirect(c.W, c.R, "/", http.StatusSeeOther)
}

// errSSOConfigChanged is a callback whose SSO configuration was deleted or
// replaced after the callback read it.
var errSSOConfigChanged = errors.New("SSO was disabled or reconfigured during the sign-in")

// checkSSOConfig checks inside tx that cfg, the configuration the callback
// read at its start (and exchanged the code with), is still the current
// one: every PUT sets a new updated_at, a DELETE removes the row. A sign-in
// that outlives its configuration would otherwise open a session, or
// provision or link an account, after the admin disabled SSO (which ends
// the sessions SSO opened and unlinks every account) or moved it to
// another provider or client (which unlinks them).
//
// The row stays locked (FOR SHARE) until tx ends: on PostgreSQL a PUT or
// DELETE of the configuration committed meanwhile is seen here, and one
// still running waits for the sign-in's transaction, after which the
// DELETE ends the session just opened. (SQLite has no row locks; its
// write transactions are serialised whole: _txlock=immediate.)
func checkSSOConfig(tx *gorm.DB, cfg *storage.SSOConfig) error {
	var rows []storage.SSOConfig
	if err := tx.Clauses(clause.Locking{Strength: "SHARE"}).Where("id = ?", cfg.ID).Limit(1).Find(&rows).Error; err != nil {
		return fmt.Errorf("reading SSO configuration: %w", err)
	}
	if len(rows) == 0 || !rows[0].UpdatedAt.Equal(cfg.UpdatedAt) {
		return errSSOConfigChanged
	}
	return nil
}

// ssoRefusal carries a refusal of ssoUser's (reason, and the error behind
// it if any) out of the session's transaction.
type ssoRefusal struct {
	reason string
	err    error
}

func (r *ssoRefusal) Error() string {
	if r.err == nil {
		return r.reason
	}
	return r.reason + ": " + r.err.Error()
}

func (r *ssoRefusal) Unwrap() error { return r.err }

// ssoUser finds the account of the provider identity sub: the account
// linked to it, else the account with the claims' email, which is then
// linked to it; or it provisions one when the configuration allows it. A
// non-empty reason is a refusal. db is the session's transaction
// (startSessionWith): the provisioning, whose insert a concurrent first
// sign-in of the same identity can make fail, is a nested transaction (a
// savepoint), so that on PostgreSQL, which aborts a transaction at a
// failed statement, the account that sign-in created can still be read.
//
// The link is what keeps a provider identity from signing in to an account
// by claiming its email (providers that let users set an unverified email
// and send no email_verified claim, Entra's "nOAuth"): once an account has
// signed in through SSO, another identity with its email is refused.
func ssoUser(db *gorm.DB, cfg *storage.SSOConfig, sub string, cl *ssoClaims) (*storage.AdminUser, string, error) {
	key := emailKey(cl.Email)
	find := func(column, value string) (*storage.AdminUser, error) {
		var rows []storage.AdminUser
		if err := db.Where(column+" = ?", value).Limit(1).Find(&rows).Error; err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			return nil, nil
		}
		return &rows[0], nil
	}
	u, err := find("sso_subject", sub)
	if err != nil {
		return nil, "server_error", err
	}
	if u != nil {
		return u, "", nil
	}
	u, err = find("email_key", key)
	if err != nil {
		return nil, "server_error", err
	}
	if u != nil {
		// email_key folds Unicode case (strings.ToLower: the Kelvin sign
		// U+212A lowers to k), so a provider's kim@… spelled with it
		// would find kim@…'s account. Only ASCII case may differ.
		if !asciiEqualFold(u.Email, cl.Email) {
			return nil, "not_provisioned", fmt.Errorf("the provider's email %q differs from user %d's beyond ASCII case", cl.Email, u.ID)
		}
		return linkSubject(db, u, sub)
	}
	if cfg.AutoProvisionRole == nil {
		return nil, "not_provisioned", nil
	}
	if len(cfg.AllowedDomains) > 0 {
		domain := key[strings.LastIndex(key, "@")+1:]
		ok := false
		for _, d := range cfg.AllowedDomains {
			// ASCII case only: strings.EqualFold would let ſtartup.io
			// (U+017F) pass for startup.io.
			if asciiEqualFold(d, domain) {
				ok = true
				break
			}
		}
		if !ok {
			return nil, "domain_not_allowed", nil
		}
	}
	row := storage.AdminUser{Email: cl.Email, EmailKey: key, Name: cleanName(cl.Name), Role: *cfg.AutoProvisionRole, SSOSubject: &sub}
	err = db.Transaction(func(tx *gorm.DB) error {
		if lockout, err := wouldLockOut(tx, row.Role); err != nil {
			return err
		} else if lockout {
			return errNoAdmin
		}
		return tx.Create(&row).Error
	})
	switch {
	case errors.Is(err, errNoAdmin):
		return nil, "not_provisioned", err
	case storage.IsConflict(err):
		// Provisioned by a concurrent sign-in of the same identity.
		if u, err := find("sso_subject", sub); err == nil && u != nil {
			return u, "", nil
		}
		return nil, "server_error", err
	case err != nil:
		return nil, "server_error", err
	}
	return &row, "", nil
}

// linkSubject links u to the provider identity sub, unless u is linked to
// another one (identity_mismatch). Linking only an unlinked row makes two
// concurrent first sign-ins of different identities link one of them.
func linkSubject(db *gorm.DB, u *storage.AdminUser, sub string) (*storage.AdminUser, string, error) {
	if u.SSOSubject == nil {
		res := db.Model(&storage.AdminUser{}).Where("id = ? AND sso_subject IS NULL", u.ID).Update("sso_subject", sub)
		if res.Error != nil {
			if storage.IsConflict(res.Error) {
				// sub was linked to another account meanwhile.
				return nil, "identity_mismatch", res.Error
			}
			return nil, "server_error", res.Error
		}
		if res.RowsAffected == 1 {
			u.SSOSubject = &sub
			return u, "", nil
		}
		if err := db.First(u, u.ID).Error; err != nil {
			return nil, "server_error", err
		}
	}
	if u.SSOSubject == nil || *u.SSOSubject != sub {
		return nil, "identity_mismatch", fmt.Errorf("user %d is linked to another identity at the provider", u.ID)
	}
	return u, "", nil
}

// cleanName is the provider's name claim as the users' endpoints accept a
// name (User.Name, a schema "name"): without control characters (what a
// provider's user typed is shown in the dashboard), trimmed, at most 255
// characters; a name of only spaces is none.
func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(strings.ToValidUTF8(s, ""))
	if r := []rune(s); len(r) > 255 {
		s = strings.TrimSpace(string(r[:255]))
	}
	return s
}

// asciiEqualFold reports whether a and b are equal but for the case of
// ASCII letters.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

var errNoAdmin = errors.New("no admin user and no admin token exist: the first user must be an admin")
