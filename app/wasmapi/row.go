package wasmapi

import (
	"time"

	"github.com/caddy-gateway/gateway/storage"
)

// Row is a stored module: an uploaded, validated proxy-wasm plugin module,
// referenced by name from wasm plugins. The admin API shows it through
// Module (View, Exported); the bytes never leave the store except in an
// export with secrets, and never enter Caddy's JSON config.
type Row struct {
	ID        int64  `gorm:"primaryKey"`
	Name      string `gorm:"uniqueIndex;not null"`
	SizeBytes int64
	SHA256    string `gorm:"column:sha256;index"` // hex of the binary module
	Wasm      []byte `gorm:"column:wasm"`
	CreatedAt time.Time
}

// TableName implements gorm's tabler.
func (Row) TableName() string { return "wasm_modules" }

// Table is the modules' table in the gateway's store: the app adds it to
// the store (AddTable, in its feature list), and every snapshot then holds
// the rows without their bytes (Table.Rows); LoadSources reads the bytes
// the wasm plugins need.
var Table = storage.NewTable[Row]("wasm_modules", "wasm")
