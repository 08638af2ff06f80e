package auth

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/storage"
)

// Login is the password sign-in input.
type Login struct {
	Email    string `json:"email" schema:"required,format=email"`
	Password string `json:"password" schema:"required,writeonly"`
}

// Validate implements schema.Validator.
func (l *Login) Validate() error { return validEmail(l.Email) }

// PasswordChange is the input of a user's own password change.
type PasswordChange struct {
	CurrentPassword *string `json:"current_password" schema:"writeonly" doc:"Required when the account has a password; SSO-only accounts may set a first password without it."`
	NewPassword     string  `json:"new_password" schema:"required,writeonly,minLength=8,maxLength=1024"`
}

// SignedOut is the answer of logout.
type SignedOut struct {
	SignedOut bool `json:"signed_out"`
}

// Updated is the answer of a password change.
type Updated struct {
	Updated bool `json:"updated"`
}

const sessionDoc = "The session cookie gateway_session is HttpOnly, SameSite=Lax, Path=/, Max-Age 7 days, Secure when settings.public_url is https. " +
	"It carries a 32-byte random token; only its SHA-256 is stored server-side, with a fixed expiry 7 days after sign-in. " +
	"Every sign-in creates a new session (a session cookie sent along is ended: no fixation). Expired sessions are refused and deleted on use, and all expired sessions are purged at every sign-in and at start. " +
	"A request carrying more than one gateway_session cookie is 401 (another page on the host name set one: cookie tossing); the proxy never forwards the cookie to an upstream, nor an upstream's Set-Cookie for it to the client."

func sessionEndpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "POST", Path: "/api/v1/auth/login", Role: api.RolePublic, Tag: "auth",
			Summary: "Sign in with email and password (public)",
			Description: "Answers the Principal and sets the session cookie. " + sessionDoc + " " +
				"Failed logins are limited per client IP (trusted_proxies honoured; IPv6 per /64): after 10 failures within 15 minutes every login attempt from that client answers 429 with Retry-After (seconds) until the oldest of those failures is 15 minutes old; a success does not reset the count. " +
				"A Content-Type other than application/json (for example a cross-site HTML form) is refused with 400 (login CSRF). Unknown accounts cost the same time as wrong passwords. " +
				"A sign-in during which the account's password is changed or the account deleted answers 401 and opens no session.",
			Body: Login{}, Response: api.Principal{}, Statuses: []int{400, 401, 429}, Handle: login},
		{Method: "POST", Path: "/api/v1/auth/logout", Role: api.RoleViewer, Tag: "auth",
			Summary:     "Sign out: delete the session and clear the cookie",
			Description: "With token authentication there is no session; the cookie is cleared all the same. " + csrfRule,
			Response:    SignedOut{}, Handle: logout},
		{Method: "GET", Path: "/api/v1/auth/me", Role: api.RoleViewer, Tag: "auth",
			Summary: "Who is calling", Response: api.Principal{}, Handle: me},
		{Method: "PUT", Path: "/api/v1/auth/me/password", Role: api.RoleViewer, Tag: "auth",
			Summary: "Change the signed-in user's own password",
			Description: "Needs a session (400 for the admin token or open mode: they have no user). current_password is required when a password is set (400 when missing or wrong); SSO-only accounts may set a first password. " +
				"A wrong current_password counts as a failed login of the client, and a client the failed-login limit blocks gets 400 naming current_password, with Retry-After (see POST /api/v1/auth/login; 400 rather than login's 429 because the specification lists 200, 400 and 401 for this endpoint). " +
				"The user's other sessions end; the current one stays. When a reset of the password by an admin (or the account's deletion) commits first, it wins: the change answers 401 (the session ended with it). " + csrfRule,
			Body: PasswordChange{}, Response: Updated{}, Statuses: []int{400}, Handle: changePassword},
	}
}

// secureCookie: the cookie is Secure when the public URL is https.
func secureCookie(db *gorm.DB) bool {
	u, err := url.Parse(settingsRow(db).PublicURL)
	return err == nil && strings.EqualFold(u.Scheme, "https")
}

// errCredentialChanged is a sign-in or password change whose account was
// deleted, or its password changed, after the sign-in read it.
var errCredentialChanged = errors.New("the account was deleted or its credential changed meanwhile")

// updateUnchanged sets column of u's row to value only if the row still
// has the password hash u was read with (errCredentialChanged otherwise:
// the account was deleted or its password changed meanwhile).
func updateUnchanged(tx *gorm.DB, u *storage.AdminUser, column string, value any) error {
	res := tx.Model(&storage.AdminUser{}).Where("id = ? AND password_hash = ?", u.ID, u.PasswordHash).Update(column, value)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errCredentialChanged
	}
	return nil
}

// startSession creates a session for u and sets its cookie. A session the
// request already carried is ended first: a sign-in always gets a new
// session id.
//
// u is the account as the sign-in read it before checking the password
// (a slow hash): the session is created only if the account still exists
// with that password hash (errCredentialChanged otherwise). A password
// change or a deletion committed meanwhile ends the user's sessions, and
// must end this one too: a password reset would otherwise leave the old
// password's sign-in in. The conditional update of the user's row comes
// first: on PostgreSQL its row lock orders it with the change (updateUser,
// changePassword and deleteUser write the row before they delete the
// sessions).
func startSession(db *gorm.DB, w http.ResponseWriter, r *http.Request, u *storage.AdminUser, method string) error {
	_, err := startSessionWith(db, w, r, method, func(*gorm.DB) (*storage.AdminUser, error) { return u, nil })
	return err
}

// startSessionWith is startSession for the account that account answers
// inside the session's transaction, before anything else is written
// there: the SSO callback checks there that the configuration it signed
// in with is still the current one, and finds, links or provisions the
// account, so that none of it is written when the check fails. An error
// of account rolls the transaction back and is returned wrapped. The
// account's row is then updated on startSession's condition: a password
// change or a deletion committed since account read it wins.
func startSessionWith(db *gorm.DB, w http.ResponseWriter, r *http.Request, method string, account func(tx *gorm.DB) (*storage.AdminUser, error)) (*storage.AdminUser, error) {
	tok, err := randomToken(32)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	purgeExpired(db)
	var u *storage.AdminUser
	err = db.Transaction(func(tx *gorm.DB) error {
		var err error
		if u, err = account(tx); err != nil {
			return err
		}
		if err := updateUnchanged(tx, u, "last_login_at", now); err != nil {
			return err
		}
		u.LastLoginAt = &now
		if ck, err := r.Cookie(cookieName); err == nil && ck.Value != "" {
			if err := tx.Where("token_hash = ?", sha256Hex(ck.Value)).Delete(&storage.AdminSession{}).Error; err != nil {
				return err
			}
		}
		sess := storage.AdminSession{TokenHash: sha256Hex(tok), UserID: u.ID, Method: method, CreatedAt: now, ExpiresAt: now.Add(sessionTTL)}
		return tx.Create(&sess).Error
	})
	if err != nil {
		return nil, fmt.Errorf("creating session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: tok, Path: "/",
		MaxAge: int(sessionTTL / time.Second), Expires: now.Add(sessionTTL),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureCookie(db),
	})
	return u, nil
}

func clearCookie(db *gorm.DB, w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, Expires: time.Unix(0, 0),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureCookie(db)})
}

func login(c *api.Call) (any, error) {
	s := svc(c)
	db := s.db(c.Ctx())
	key := clientKey(c.R, db)
	if err := s.limiter.admit(c, db, key); err != nil {
		return nil, err
	}
	if ct := c.R.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, api.BadRequest("the request body must be sent as application/json")
		}
	}
	in := &Login{}
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	// The check above answers a blocked client without reading its body;
	// the one under the client's lock is the one that counts (limiter.lock).
	defer s.limiter.lock(key)()
	if err := s.limiter.admit(c, db, key); err != nil {
		return nil, err
	}
	var u storage.AdminUser
	err := db.Where("email_key = ?", emailKey(in.Email)).Take(&u).Error
	if err != nil && !storage.IsNotFound(err) {
		return nil, fmt.Errorf("reading user: %w", err)
	}
	found := err == nil
	// checkPassword costs one hash even without an account or a password.
	ok := checkPassword(u.PasswordHash, in.Password) && found && u.PasswordHash != ""
	if !ok {
		if err := s.limiter.fail(db, key); err != nil {
			return nil, err
		}
		return nil, unauthorized("invalid email or password")
	}
	if err := startSession(db, c.W, c.R, &u, "password"); err != nil {
		if errors.Is(err, errCredentialChanged) {
			return nil, unauthorized("invalid email or password")
		}
		return nil, err
	}
	return &api.Principal{Role: u.Role, Method: "session", User: userView(&u)}, nil
}

func logout(c *api.Call) (any, error) {
	db := svc(c).db(c.Ctx())
	if ck, err := c.R.Cookie(cookieName); err == nil && ck.Value != "" {
		if err := db.Where("token_hash = ?", sha256Hex(ck.Value)).Delete(&storage.AdminSession{}).Error; err != nil {
			return nil, fmt.Errorf("deleting session: %w", err)
		}
	}
	clearCookie(db, c.W)
	return SignedOut{SignedOut: true}, nil
}

func me(c *api.Call) (any, error) {
	p := api.PrincipalFrom(c.Ctx())
	if p == nil {
		return nil, unauthorized("authentication required")
	}
	return p, nil
}

func changePassword(c *api.Call) (any, error) {
	p := api.PrincipalFrom(c.Ctx())
	if p == nil || p.Method != "session" {
		return nil, api.BadRequest("only a user signed in with a session has a password to change")
	}
	in := &PasswordChange{}
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	db := svc(c).db(c.Ctx())
	cookie, err := sessionCookie(c.R)
	if err != nil {
		return nil, unauthorized("authentication required")
	}
	u, sess, err := sessionUser(db, cookie)
	if errors.Is(err, api.ErrUnauthenticated) {
		return nil, unauthorized(err.Error())
	}
	if err != nil {
		return nil, err
	}
	if u.PasswordHash != "" {
		if in.CurrentPassword == nil || *in.CurrentPassword == "" {
			return nil, api.BadRequest("current_password: is required")
		}
		// current_password is a password check like a sign-in: without the
		// failed-login limit a stolen session could guess the account's
		// password here for as long as it lives, then keep the account.
		s := svc(c)
		key := clientKey(c.R, db)
		defer s.limiter.lock(key)()
		if err := s.limiter.admit(c, db, key); err != nil {
			var blocked *api.APIError
			if errors.As(err, &blocked) && blocked.Status == http.StatusTooManyRequests {
				// admit set Retry-After; the specification lists 200,
				// 400 and 401 for this endpoint
				return nil, api.BadRequest("current_password: too many failed attempts from this address; try again later")
			}
			return nil, err
		}
		if !checkPassword(u.PasswordHash, *in.CurrentPassword) {
			if err := s.limiter.fail(db, key); err != nil {
				return nil, err
			}
			return nil, api.BadRequest("current_password: is not correct")
		}
	}
	h, err := hashPassword(in.NewPassword)
	if err != nil {
		return nil, err
	}
	err = db.Transaction(func(tx *gorm.DB) error {
		// Only over the password just checked: a reset by an admin (or
		// another session's change, or a deletion) committed meanwhile
		// ended this session, and wins.
		if err := updateUnchanged(tx, u, "password_hash", h); err != nil {
			return err
		}
		return tx.Where("user_id = ? AND id <> ?", u.ID, sess.ID).Delete(&storage.AdminSession{}).Error
	})
	if errors.Is(err, errCredentialChanged) {
		return nil, unauthorized("the session ended: the account's password was changed or the account deleted meanwhile")
	}
	if err != nil {
		return nil, fmt.Errorf("updating password: %w", err)
	}
	return Updated{Updated: true}, nil
}
