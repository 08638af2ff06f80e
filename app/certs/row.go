package certs

import (
	"time"

	"github.com/caddy-gateway/gateway/storage"
)

// Row is a stored certificate: an uploaded (manual) chain with its key, or
// an ACME-managed set of names whose certificate lives in Caddy's storage
// (certmagic). KeyPEM never leaves the store except in an export with
// secrets; the admin API shows a row through Certificate (View, Exported).
type Row struct {
	ID        int64    `gorm:"primaryKey"`
	ACME      bool     `gorm:"column:acme"`
	Domains   []string `gorm:"serializer:json"`
	Challenge string   // ACME: http-01, tls-alpn-01 or dns-01; "" for manual
	CertPEM   string   // manual: the chain, leaf first
	KeyPEM    string   // manual: the private key
	// Status is pending, active, failed or expired; for manual
	// certificates it is derived from the validity period when read.
	Status      string
	Issuer      string
	NotBefore   *time.Time
	NotAfter    *time.Time
	Fingerprint string // SHA-256 of the leaf, hex
	LastError   *string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// TableName implements gorm's tabler.
func (Row) TableName() string { return "certificates" }

// Table is the certificates' table in the gateway's store: the app adds it
// to the store (AddTable, in its feature list), and every snapshot then
// holds the rows (Table.Rows) that Compile turns into the tls app.
var Table = storage.NewTable[Row]("certificates")
