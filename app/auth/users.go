package auth

import (
	"fmt"
	"net/mail"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

func userEndpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/users", Role: api.RoleAdmin, Tag: "users",
			Summary: "List users (ordered by id)", Response: api.User{}, ResponseList: true, Handle: listUsers},
		{Method: "POST", Path: "/api/v1/users", Role: api.RoleAdmin, Tag: "users",
			Summary: "Create a user",
			Description: "password is required unless SSO is configured (then the account may be SSO-only). Emails are unique case-insensitively (400 on a duplicate). " +
				"The first user may be created without credentials while authentication is disabled; it enables authentication. " +
				"While no admin user and no admin token exist, the new user must have the admin role (400 otherwise), so the gateway cannot be locked out. " +
				csrfRule,
			Body: User{}, Response: api.User{}, Statuses: []int{400}, Handle: createUser},
		{Method: "PUT", Path: "/api/v1/users/{id}", Role: api.RoleAdmin, Tag: "users",
			Summary: "Replace a user",
			Description: "Full replacement; an omitted (or null) password keeps the current one; supplying a password ends all of that user's sessions. " +
				"Changing the email (beyond letter case) unlinks the account from its SSO provider identity (sso_linked). " +
				"Demoting the last admin user is refused (400). Role changes apply to the user's sessions at once. " + csrfRule,
			Body: User{}, Response: api.User{}, Statuses: []int{400, 404}, Handle: updateUser},
		{Method: "DELETE", Path: "/api/v1/users/{id}", Role: api.RoleAdmin, Tag: "users",
			Summary:     "Delete a user and end their sessions at once",
			Description: "Deleting the last admin user is refused (400). " + csrfRule,
			Response:    api.Deleted{}, Statuses: []int{400, 404}, Handle: deleteUser},
	}
}

// validEmail accepts a bare addr-spec (no display name, no angle brackets,
// no surrounding spaces) with a dotted or single-label domain.
func validEmail(e string) error {
	a, err := mail.ParseAddress(e)
	if err != nil || a.Name != "" || a.Address != e || strings.ContainsAny(e, " \t\r\n<>") {
		return schema.Errorf("email", "must be an email address")
	}
	at := strings.LastIndex(e, "@")
	if at < 1 || at == len(e)-1 {
		return schema.Errorf("email", "must be an email address")
	}
	return nil
}

func emailKey(e string) string { return strings.ToLower(e) }

func listUsers(c *api.Call) (any, error) {
	var rows []storage.AdminUser
	if err := svc(c).db(c.Ctx()).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing users: %w", err)
	}
	out := make([]*api.User, len(rows))
	for i := range rows {
		out[i] = userView(&rows[i])
	}
	return out, nil
}

func ssoConfigured(db *gorm.DB) (bool, error) {
	cfg, err := loadSSOConfig(db)
	return cfg != nil, err
}

func emailTaken(tx *gorm.DB, key string, exceptID int64) error {
	var n int64
	if err := tx.Model(&storage.AdminUser{}).Where("email_key = ? AND id <> ?", key, exceptID).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return api.BadRequest("email: a user with this email exists")
	}
	return nil
}

// countAdmins counts the admin users inside tx, locking their rows (FOR
// UPDATE) until tx ends: under PostgreSQL's read committed, two
// transactions demoting or deleting the two last admins at once would
// otherwise each count two and both commit, leaving none. The second now
// waits for the first and counts what it left. (SQLite has no row locks;
// its write transactions are serialised whole: _txlock=immediate.)
func countAdmins(tx *gorm.DB) (int64, error) {
	var ids []int64
	err := tx.Model(&storage.AdminUser{}).Clauses(clause.Locking{Strength: "UPDATE"}).
		Where("role = ?", "admin").Pluck("id", &ids).Error
	return int64(len(ids)), err
}

func createUser(c *api.Call) (any, error) {
	in := &User{}
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	db := svc(c).db(c.Ctx())
	if in.Password == nil {
		sso, err := ssoConfigured(db)
		if err != nil {
			return nil, err
		}
		if !sso {
			return nil, api.BadRequest("password: is required (SSO is not configured)")
		}
	}
	row := storage.AdminUser{Email: in.Email, EmailKey: emailKey(in.Email), Name: in.Name, Role: in.Role}
	if in.Password != nil {
		h, err := hashPassword(*in.Password)
		if err != nil {
			return nil, err
		}
		row.PasswordHash = h
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		if err := emailTaken(tx, row.EmailKey, 0); err != nil {
			return err
		}
		if lockout, err := wouldLockOut(tx, row.Role); err != nil {
			return err
		} else if lockout {
			return api.BadRequest("role: the first administrator must have the admin role (no admin user and no admin token exist)")
		}
		return tx.Create(&row).Error
	})
	if err != nil {
		if storage.IsConflict(err) {
			return nil, api.BadRequest("email: a user with this email exists")
		}
		return nil, err
	}
	return userView(&row), nil
}

func loadUser(db *gorm.DB, id int64) (*storage.AdminUser, error) {
	var u storage.AdminUser
	if err := db.Take(&u, id).Error; err != nil {
		if storage.IsNotFound(err) {
			return nil, api.NotFound(fmt.Sprintf("user %d not found", id))
		}
		return nil, fmt.Errorf("reading user %d: %w", id, err)
	}
	return &u, nil
}

func updateUser(c *api.Call) (any, error) {
	id, err := c.ID("id")
	if err != nil {
		return nil, err
	}
	db := svc(c).db(c.Ctx())
	if _, err := loadUser(db, id); err != nil {
		return nil, err
	}
	in := &User{}
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	var hash string
	if in.Password != nil {
		if hash, err = hashPassword(*in.Password); err != nil {
			return nil, err
		}
	}
	var out *storage.AdminUser
	err = db.Transaction(func(tx *gorm.DB) error {
		u, err := loadUser(tx, id)
		if err != nil {
			return err
		}
		if u.Role == "admin" && in.Role != "admin" {
			n, err := countAdmins(tx)
			if err != nil {
				return err
			}
			if n <= 1 {
				return api.BadRequest("role: the last admin user cannot be demoted")
			}
		}
		key := emailKey(in.Email)
		if err := emailTaken(tx, key, id); err != nil {
			return err
		}
		if key != u.EmailKey {
			// The account is someone else's now, or theirs under another
			// address: its next SSO sign-in links it again, by email.
			u.SSOSubject = nil
		}
		u.Email, u.EmailKey, u.Name, u.Role = in.Email, key, in.Name, in.Role
		if in.Password != nil {
			u.PasswordHash = hash
		}
		if err := tx.Save(u).Error; err != nil {
			return err
		}
		if in.Password != nil {
			// After the row is written (and, on PostgreSQL, locked): a
			// sign-in that checked the old password either committed its
			// session before, and it is deleted here, or finds the new
			// hash and creates none (startSession).
			if err := tx.Where("user_id = ?", id).Delete(&storage.AdminSession{}).Error; err != nil {
				return err
			}
		}
		out = u
		return nil
	})
	if err != nil {
		if storage.IsConflict(err) {
			return nil, api.BadRequest("email: a user with this email exists")
		}
		return nil, err
	}
	return userView(out), nil
}

func deleteUser(c *api.Call) (any, error) {
	id, err := c.ID("id")
	if err != nil {
		return nil, err
	}
	err = svc(c).db(c.Ctx()).Transaction(func(tx *gorm.DB) error {
		u, err := loadUser(tx, id)
		if err != nil {
			return err
		}
		if u.Role == "admin" {
			n, err := countAdmins(tx)
			if err != nil {
				return err
			}
			if n <= 1 {
				return api.BadRequest("the last admin user cannot be deleted")
			}
		}
		return tx.Delete(&storage.AdminUser{}, id).Error // sessions go with it (foreign key)
	})
	if err != nil {
		return nil, err
	}
	return api.Deleted{Deleted: true}, nil
}

// wouldLockOut reports whether adding a user of role would enable
// authentication with nobody able to administer the gateway: no admin user,
// no admin token, and the new user is not an admin.
func wouldLockOut(tx *gorm.DB, role string) (bool, error) {
	if role == "admin" {
		return false, nil
	}
	m, err := loadMode(tx)
	if err != nil {
		return false, err
	}
	admins, err := countAdmins(tx)
	if err != nil {
		return false, err
	}
	return admins == 0 && m.tokenHash == "", nil
}
