package storage

import "time"

// Snapshots hold the modules' metadata only: the bytes are read by whoever
// needs them (the wasm feature hands them to the plugin runtime by
// reference).
func init() { registerTable[WasmModule](WasmModulesKey, "wasm modules", "wasm") }

// WasmModulesKey is the key of the []WasmModule (without bytes) in
// Snapshot.Extra.
const WasmModulesKey = "wasm_modules"

// WasmModule is an uploaded, validated proxy-wasm plugin module, referenced
// by name from wasm plugins. The admin API declares its own input and
// output shapes (adminext/wasmapi); the bytes never leave the store except
// in an export with secrets, and never enter Caddy's JSON config.
type WasmModule struct {
	ID        int64  `gorm:"primaryKey"`
	Name      string `gorm:"uniqueIndex;not null"`
	SizeBytes int64
	SHA256    string `gorm:"column:sha256;index"` // hex of the binary module
	Wasm      []byte `gorm:"column:wasm"`
	CreatedAt time.Time
}

// TableName implements gorm's tabler.
func (WasmModule) TableName() string { return "wasm_modules" }

// WasmModules are the module rows of a snapshot, without their bytes.
func (s *Snapshot) WasmModules() []WasmModule { return extraRows[WasmModule](s, WasmModulesKey) }
