package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Helpers shared by the plugin types' implementations.

// IntArg reads the one integer argument of the Caddyfile subdirective at
// the dispenser's cursor; errors name the subdirective.
func IntArg(d *caddyfile.Dispenser) (int64, error) {
	name := d.Val()
	var s string
	if !d.Args(&s) {
		return 0, d.ArgErr()
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, d.Errf("%s: %v", name, err)
	}
	return n, nil
}

// BoolArg reads the optional boolean argument of a Caddyfile flag
// subdirective ("hide_credentials" alone means true); errors name the
// subdirective.
func BoolArg(d *caddyfile.Dispenser) (bool, error) {
	name := d.Val()
	args := d.RemainingArgs()
	switch len(args) {
	case 0:
		return true, nil
	case 1:
		b, err := strconv.ParseBool(args[0])
		if err != nil {
			return false, d.Errf("%s: %v", name, err)
		}
		return b, nil
	}
	return false, d.ArgErr()
}

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
