package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// Helpers shared by the plugin types' implementations.

// InstanceKey identifies a plugin instance in process-wide state that
// outlives config reloads: its id (set by the gateway's config compiler),
// or, used standalone, a hash of its settings, so that a reload with the
// same settings finds the same state.
func InstanceKey(id int64, settings any) string {
	if id > 0 {
		return "id:" + strconv.FormatInt(id, 10)
	}
	b, _ := json.Marshal(settings)
	sum := sha256.Sum256(b)
	return "cfg:" + hex.EncodeToString(sum[:8])
}
