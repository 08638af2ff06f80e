package controlplane

import (
	"encoding/json"
	"os"

	"github.com/caddyserver/caddy/v2"
)

// A stream route or a proxy listener that took the port of the admin API or
// of Caddy's admin endpoint would, after a restart, stop the gateway from
// starting or hand those ports' traffic to an upstream. Listener addresses
// are therefore checked (package domain) against every listener the
// gateway knows of.

// NamedAddr is a listener address and what it is, for messages.
type NamedAddr struct{ What, Addr string }

// ReservedListeners are the listeners no configurable address may collide
// with: the gateway admin API (configured and bound) and Caddy's admin
// endpoint (every address it may be on; unix sockets cannot collide).
func (cp *ControlPlane) ReservedListeners() []NamedAddr {
	out := []NamedAddr{{"the gateway admin API listener", cp.Boot().AdminListen}}
	if a := cp.AdminAddr(); a != "" {
		out = append(out, NamedAddr{"the gateway admin API listener", a})
	}
	// Caddy's admin endpoint: as the running config says, else as the
	// gateway was told, else Caddy's default.
	var caddyAdmin string
	if raw := cp.base["admin"]; len(raw) > 0 {
		var ac struct {
			Listen string `json:"listen"`
		}
		if json.Unmarshal(raw, &ac) == nil {
			caddyAdmin = ac.Listen
		}
	}
	for _, a := range []string{cp.Boot().CaddyAdmin, os.Getenv("CADDY_ADMIN"), caddy.DefaultAdminListen} {
		if caddyAdmin == "" {
			caddyAdmin = a
		}
	}
	if na, err := caddy.ParseNetworkAddress(caddyAdmin); err == nil && !na.IsUnixNetwork() && !na.IsFdNetwork() {
		out = append(out, NamedAddr{"Caddy's admin endpoint", na.JoinHostPort(0)})
	}
	return out
}
