package storage

import "time"

// Tables of the admin authentication feature (package app/auth).
// None of them is part of the routing configuration: they are never in a
// Snapshot, an export or an import.

func init() {
	registerModels(&AdminUser{}, &AdminSession{}, &AdminToken{}, &SSOConfig{}, &SSOState{})
}

// AdminUser is a user of the admin API and dashboard.
type AdminUser struct {
	ID    int64  `gorm:"primaryKey"`
	Email string `gorm:"not null"`
	// EmailKey is the lower-cased email: unique, the key of password and
	// SSO sign-in.
	EmailKey string `gorm:"uniqueIndex;not null"`
	Name     string `gorm:"not null;default:''"`
	Role     string `gorm:"not null"` // viewer, editor, admin
	// PasswordHash is an argon2id PHC string; empty for SSO-only accounts.
	PasswordHash string `gorm:"not null;default:''"`
	// SSOSubject is the sub claim of the provider identity the account is
	// linked to: set at its first SSO sign-in (found by email), after which
	// only that identity signs in to it, whatever email the provider then
	// says. nil: not linked. Cleared when the account's email or the SSO
	// issuer or client_id changes.
	SSOSubject  *string `gorm:"uniqueIndex"`
	CreatedAt   time.Time
	UpdatedAt   time.Time
	LastLoginAt *time.Time
}

// TableName implements gorm's tabler.
func (AdminUser) TableName() string { return "admin_users" }

// AdminSession is a signed-in browser session. Only the SHA-256 of the
// cookie's random token is stored.
type AdminSession struct {
	ID        int64      `gorm:"primaryKey"`
	TokenHash string     `gorm:"uniqueIndex;not null"` // hex SHA-256 of the cookie value
	UserID    int64      `gorm:"index;not null"`
	User      *AdminUser `gorm:"constraint:OnDelete:CASCADE"`
	Method    string     `gorm:"not null;default:'password'"` // password or sso
	CreatedAt time.Time
	ExpiresAt time.Time `gorm:"index;not null"`
}

// TableName implements gorm's tabler.
func (AdminSession) TableName() string { return "admin_sessions" }

// AdminToken is the single admin token (row id 1), stored as its SHA-256.
type AdminToken struct {
	ID        int64  `gorm:"primaryKey"`
	TokenHash string `gorm:"not null"` // hex SHA-256
	CreatedAt time.Time
}

// TableName implements gorm's tabler.
func (AdminToken) TableName() string { return "admin_tokens" }

// SSOConfig is the OpenID Connect configuration (row id 1). The client
// secret is kept as given: the code exchange needs it; it is never answered.
type SSOConfig struct {
	ID                int64    `gorm:"primaryKey"`
	Issuer            string   `gorm:"not null"`
	ClientID          string   `gorm:"not null"`
	ClientSecret      string   `gorm:"not null;default:''"`
	Label             string   `gorm:"not null;default:''"`
	AutoProvisionRole *string  // nil: only pre-created users may sign in
	AllowedDomains    []string `gorm:"serializer:json"`
	UpdatedAt         time.Time
}

// TableName implements gorm's tabler.
func (SSOConfig) TableName() string { return "sso_configs" }

// SSOState is one pending SSO sign-in: the state (as its SHA-256), nonce,
// PKCE verifier and redirect URI, for 10 minutes and one use.
type SSOState struct {
	ID          int64  `gorm:"primaryKey"`
	StateHash   string `gorm:"uniqueIndex;not null"`
	BindingHash string `gorm:"not null"` // SHA-256 of the browser-binding cookie
	Nonce       string `gorm:"not null"`
	Verifier    string `gorm:"not null"`
	RedirectURI string `gorm:"not null"`
	CreatedAt   time.Time
	ExpiresAt   time.Time `gorm:"index;not null"`
}

// TableName implements gorm's tabler.
func (SSOState) TableName() string { return "sso_states" }
