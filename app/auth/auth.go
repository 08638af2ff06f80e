// Package auth is the admin authentication feature of the gateway: the
// admin token, users with roles, password sessions, failed-login limiting
// and OpenID Connect single sign-on. It installs the admin API's
// Authenticator and its endpoints from init; the roles each endpoint needs
// are declared on the endpoints (package app enforces them).
//
// Modes: while no admin token and no user exist the API is open (every
// caller is admin, Principal.method "open"); from the first user or token
// on, every non-public endpoint needs a credential: the admin token
// (Authorization: Bearer, X-Admin-Token, or access_token on /api/v1/events
// only) or the gateway_session cookie.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/storage"
)

const (
	cookieName = guard.SessionCookie // the proxy never forwards it (guard.DropAdminCookies)
	sessionTTL = 7 * 24 * time.Hour
	eventsPath = "/api/v1/events"
)

// service is the feature's state for one control plane: the failed-login
// limiter and the OpenID provider cache. Everything else is in the store.
type service struct {
	cp      *controlplane.ControlPlane
	limiter *limiter
	oidc    *providerCache
}

// New is the admin API's authenticator for cp (api.New calls it).
func New(cp *controlplane.ControlPlane) (api.Authenticator, error) { return newService(cp), nil }

func newService(cp *controlplane.ControlPlane) *service {
	s := &service{cp: cp, limiter: newLimiter(loginMaxFailures, loginWindow, limiterCap), oidc: newProviderCache()}
	if db := s.db(context.Background()); db != nil {
		purgeExpired(db)
	}
	return s
}

// svc is the feature's state of the control plane serving c: the admin
// API's authenticator, installed by the factory above.
func svc(c *api.Call) *service { return c.API.Authenticator().(*service) }

func (s *service) db(ctx context.Context) *gorm.DB {
	st := s.cp.Store()
	if st == nil {
		return nil
	}
	return st.DB.WithContext(ctx)
}

// ---- declarations ----

// User is the declaration of the user input (UserInput). Answers are
// api.User; the read-only fields are accepted (and ignored) so that an
// answer can be sent back as it is.
type User struct {
	ID          int64      `json:"id" schema:"readonly"`
	Email       string     `json:"email" schema:"required,format=email,maxLength=254" doc:"Unique (case-insensitive); the key of password and SSO sign-in."`
	Name        string     `json:"name" schema:"name"`
	Role        string     `json:"role" schema:"required,enum=viewer|editor|admin"`
	Password    *string    `json:"password,omitempty" schema:"writeonly,minLength=8,maxLength=1024" doc:"At least 8 characters; stored as an argon2id hash. On update, omit (or null) to keep the current one; supplying one ends the user's sessions."`
	HasPassword bool       `json:"has_password" schema:"readonly" doc:"false for SSO-only accounts."`
	SSOLinked   bool       `json:"sso_linked" schema:"readonly" doc:"Only an SSO sign-in links an account; changing the email (beyond letter case) unlinks it."`
	CreatedAt   time.Time  `json:"created_at" schema:"readonly"`
	LastLoginAt *time.Time `json:"last_login_at" schema:"readonly"`
}

// Validate implements schema.Validator.
func (u *User) Validate() error {
	if err := validEmail(u.Email); err != nil {
		return err
	}
	return nil
}

func userView(u *storage.AdminUser) *api.User {
	return &api.User{ID: u.ID, Email: u.Email, Name: u.Name, Role: u.Role, HasPassword: u.PasswordHash != "",
		SSOLinked: u.SSOSubject != nil, CreatedAt: u.CreatedAt, LastLoginAt: u.LastLoginAt}
}

// AdminStatus tells a client (the dashboard before sign-in) how the admin
// API is protected.
type AdminStatus struct {
	AuthEnabled  bool           `json:"auth_enabled" doc:"true when an admin token or any user exists."`
	TokenEnabled bool           `json:"token_enabled"`
	UsersExist   bool           `json:"users_exist"`
	SSO          AdminStatusSSO `json:"sso"`
}

// AdminStatusSSO is the sign-in button.
type AdminStatusSSO struct {
	Enabled bool   `json:"enabled"`
	Label   string `json:"label" doc:"The sign-in button label (empty while SSO is disabled)."`
}

// AdminToken is the answer of a token creation: the only time the token is
// shown.
type AdminToken struct {
	Token string `json:"token" doc:"64 lowercase hex characters; shown only in this answer, stored as its SHA-256."`
	Note  string `json:"note"`
}

// ---- mode and credentials ----

// mode is what decides authentication: the token hash and whether users
// exist.
type mode struct {
	tokenHash  string
	usersExist bool
}

func (m mode) enabled() bool { return m.tokenHash != "" || m.usersExist }

// Open reports whether the admin API is open: no admin token and no user
// exists, so every caller is admin.
func Open(db *gorm.DB) (bool, error) {
	m, err := loadMode(db)
	return !m.enabled(), err
}

func loadMode(db *gorm.DB) (mode, error) {
	var m mode
	var toks []storage.AdminToken
	if err := db.Where("id = ?", 1).Limit(1).Find(&toks).Error; err != nil {
		return m, fmt.Errorf("reading admin token: %w", err)
	}
	if len(toks) == 1 {
		m.tokenHash = toks[0].TokenHash
	}
	var ids []int64
	if err := db.Model(&storage.AdminUser{}).Limit(1).Pluck("id", &ids).Error; err != nil {
		return m, fmt.Errorf("reading users: %w", err)
	}
	m.usersExist = len(ids) > 0
	return m, nil
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// tokenMatches compares the SHA-256 of a presented token with the stored
// hash in constant time.
func tokenMatches(presented, storedHex string) bool {
	stored, err := hex.DecodeString(storedHex)
	if err != nil || len(stored) != sha256.Size {
		return false
	}
	got := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(got[:], stored) == 1
}

// presentedToken is the admin token the request carries, if any:
// Authorization: Bearer, X-Admin-Token, or (on the event stream only) the
// access_token query parameter.
func presentedToken(r *http.Request, ep *api.Endpoint) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok), true
		}
	}
	if h := r.Header.Get("X-Admin-Token"); h != "" {
		return strings.TrimSpace(h), true
	}
	if ep != nil && ep.Path == eventsPath {
		if q := r.URL.Query().Get("access_token"); q != "" {
			return q, true
		}
	}
	return "", false
}

func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// unauthorized is a 401 answered by a handler (the authenticator's own
// failures wrap api.ErrUnauthenticated instead).
func unauthorized(msg string) error {
	return &api.APIError{Status: http.StatusUnauthorized, Msg: msg}
}

func unauthenticated(msg string) error {
	return fmt.Errorf("%w: %s", api.ErrUnauthenticated, msg)
}

// csrfRule is the CSRF stance for cookie authentication, stated in the
// OpenAPI document (the admin API enforces it for every endpoint).
const csrfRule = "CSRF rule: a POST, PUT, PATCH or DELETE that a browser sends from another origin (Sec-Fetch-Site cross-site or same-site, or an Origin header that is neither the request's own host nor the origin of settings.public_url) is refused with 403, whatever its credentials. Same-origin browser requests and clients that send neither header (curl, scripts, SDKs) pass with any Content-Type."

// Authenticate implements api.Authenticator.
func (s *service) Authenticate(r *http.Request, ep *api.Endpoint) (*api.Principal, error) {
	db := s.db(r.Context())
	m, err := loadMode(db)
	if err != nil {
		return nil, err
	}
	if !m.enabled() {
		return &api.Principal{Role: "admin", Method: "open"}, nil
	}
	if tok, ok := presentedToken(r, ep); ok {
		if m.tokenHash != "" && tokenMatches(tok, m.tokenHash) {
			return &api.Principal{Role: "admin", Method: "token"}, nil
		}
		return nil, unauthenticated("the admin token is not valid")
	}
	cookie, err := sessionCookie(r)
	if err != nil {
		return nil, err
	}
	u, _, err := sessionUser(db, cookie)
	if err != nil {
		return nil, err
	}
	return &api.Principal{Role: u.Role, Method: "session", User: userView(u)}, nil
}

// sessionCookie is the value of the request's session cookie. Two or more
// of that name mean a page on the same host name (on any port: a proxied
// upstream) set its own, with a longer Path that the browser sends first
// or a parent Domain (cookie tossing): none is trusted.
func sessionCookie(r *http.Request) (string, error) {
	cks := r.CookiesNamed(cookieName)
	switch {
	case len(cks) == 0 || cks[0].Value == "":
		return "", api.ErrUnauthenticated
	case len(cks) > 1:
		return "", unauthenticated("the request carries more than one " + cookieName + " cookie (another page on this host name set one): clear this site's cookies and sign in again")
	}
	return cks[0].Value, nil
}

// sessionUser resolves a session cookie value. The lookup is by the SHA-256
// of the cookie's 256-bit random token (an index lookup on a hash of a
// secret the caller does not control tells nothing through timing). An
// expired session is deleted.
func sessionUser(db *gorm.DB, cookie string) (*storage.AdminUser, *storage.AdminSession, error) {
	var sess storage.AdminSession
	err := db.Where("token_hash = ?", sha256Hex(cookie)).Take(&sess).Error
	if storage.IsNotFound(err) {
		return nil, nil, unauthenticated("the session is not valid (signed out or expired)")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading session: %w", err)
	}
	if !time.Now().Before(sess.ExpiresAt) {
		_ = db.Delete(&storage.AdminSession{}, sess.ID).Error
		return nil, nil, unauthenticated("the session has expired")
	}
	var u storage.AdminUser
	if err := db.Take(&u, sess.UserID).Error; err != nil {
		if storage.IsNotFound(err) {
			_ = db.Delete(&storage.AdminSession{}, sess.ID).Error
			return nil, nil, unauthenticated("the session is not valid")
		}
		return nil, nil, fmt.Errorf("reading user: %w", err)
	}
	return &u, &sess, nil
}

// purgeExpired removes expired sessions and SSO states.
func purgeExpired(db *gorm.DB) {
	now := time.Now()
	_ = db.Where("expires_at <= ?", now).Delete(&storage.AdminSession{}).Error
	_ = db.Where("expires_at <= ?", now).Delete(&storage.SSOState{}).Error
}

// ---- status ----

func adminStatus(db *gorm.DB) (*AdminStatus, error) {
	m, err := loadMode(db)
	if err != nil {
		return nil, err
	}
	st := &AdminStatus{AuthEnabled: m.enabled(), TokenEnabled: m.tokenHash != "", UsersExist: m.usersExist}
	cfg, err := loadSSOConfig(db)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		st.SSO = AdminStatusSSO{Enabled: true, Label: cfg.Label}
	}
	return st, nil
}

// ---- endpoints ----

// Endpoints are the sign-in, session, token and user endpoints.
func Endpoints() []*api.Endpoint {
	var eps []*api.Endpoint
	eps = append(eps, tokenEndpoints()...)
	eps = append(eps, sessionEndpoints()...)
	eps = append(eps, userEndpoints()...)
	eps = append(eps, ssoEndpoints()...)
	return eps
}

func settingsRow(db *gorm.DB) storage.Settings {
	var s storage.Settings
	_ = db.Where("id = ?", 1).Limit(1).Find(&s).Error
	return s
}
