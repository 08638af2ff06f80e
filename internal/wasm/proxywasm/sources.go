package proxywasm

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// sources is the process-wide, content-addressed registry of module bytes
// (see the package documentation).
var sources = struct {
	mu sync.RWMutex
	m  map[string][]byte
}{m: map[string][]byte{}}

// SHA256 is the registry key of module bytes: their hex sha256.
func SHA256(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// PutSource registers module bytes and returns their key (hex sha256).
// Putting the same bytes again is a no-op. The registry keeps its own copy.
func PutSource(wasm []byte) string {
	sha := SHA256(wasm)
	sources.mu.Lock()
	defer sources.mu.Unlock()
	if _, ok := sources.m[sha]; !ok {
		sources.m[sha] = append([]byte(nil), wasm...)
	}
	return sha
}

// Source returns the module bytes registered under sha (read-only: callers
// must not modify them).
func Source(sha string) ([]byte, bool) {
	sources.mu.RLock()
	defer sources.mu.RUnlock()
	b, ok := sources.m[sha]
	return b, ok
}

// DropSource forgets the bytes registered under sha. Handlers already
// provisioned keep working (they hold the compiled module); a later
// Provision naming sha fails. The caller drops a source once no stored module
// has these bytes.
func DropSource(sha string) {
	sources.mu.Lock()
	defer sources.mu.Unlock()
	delete(sources.m, sha)
}
