package auth

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"go.uber.org/zap"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/storage"
)

func tokenEndpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/admin/status", Role: api.RolePublic, Tag: "auth",
			Summary:     "How the admin API is protected (public)",
			Description: "auth_enabled is true when an admin token or any user exists; while it is false the whole API is open and every caller is admin (Principal.method open).",
			Response:    AdminStatus{}, Handle: getStatus},
		{Method: "POST", Path: "/api/v1/admin/token", Role: api.RoleAdmin, Tag: "auth",
			Summary: "Create or rotate the admin token",
			Description: "Answers a new token of 64 lowercase hex characters (32 bytes from crypto/rand) once; only its SHA-256 is stored. " +
				"In open mode this enables authentication. With authentication enabled the caller must be an admin (the current token, or an admin session); " +
				"the previous token stops working at once. The token is accepted as Authorization: Bearer <token> or X-Admin-Token: <token> " +
				"(and as the access_token query parameter on /api/v1/events only); it is compared in constant time (SHA-256 of the presented value against the stored hash). " +
				"A request presenting an invalid token is 401 even when it also carries a valid session cookie. " +
				csrfRule,
			Response: AdminToken{}, Handle: createToken},
		{Method: "DELETE", Path: "/api/v1/admin/token", Role: api.RoleAdmin, Tag: "auth",
			Summary: "Delete the admin token",
			Description: "Without users the API becomes open again; with users, authentication stays enabled and users keep protecting the API. " +
				"Beware: when no user is an admin, nobody can manage users, settings or the token afterwards (the state table allows it). Answers the new AdminStatus. " +
				csrfRule,
			Response: AdminStatus{}, Handle: deleteToken},
	}
}

func getStatus(c *api.Call) (any, error) {
	return adminStatus(svc(c).db(c.Ctx()))
}

func createToken(c *api.Call) (any, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("reading random bytes: %w", err)
	}
	tok := hex.EncodeToString(b)
	db := svc(c).db(c.Ctx())
	var existed bool
	err := db.Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&storage.AdminToken{}).Where("id = ?", 1).Count(&n).Error; err != nil {
			return err
		}
		existed = n > 0
		row := storage.AdminToken{ID: 1, TokenHash: sha256Hex(tok), CreatedAt: time.Now().UTC()}
		return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}},
			DoUpdates: clause.AssignmentColumns([]string{"token_hash", "created_at"})}).Create(&row).Error
	})
	if err != nil {
		return nil, fmt.Errorf("storing admin token: %w", err)
	}
	note := "Store this token now: it is not shown again. Authentication is enabled; send it as Authorization: Bearer <token> or X-Admin-Token."
	if existed {
		note = "Token rotated: the previous token no longer works. Store this one now: it is not shown again."
	}
	c.CP.Logger().Info("admin token created", zap.Bool("rotated", existed))
	return AdminToken{Token: tok, Note: note}, nil
}

func deleteToken(c *api.Call) (any, error) {
	db := svc(c).db(c.Ctx())
	// The state table allows this whatever the users' roles: users keep
	// protecting the API. The endpoint's description warns that without an
	// admin user nobody can manage users or settings afterwards.
	err := db.Where("id = ?", 1).Delete(&storage.AdminToken{}).Error
	if err != nil {
		return nil, err
	}
	return adminStatus(db)
}
