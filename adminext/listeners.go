package adminext

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/caddyserver/caddy/v2"
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/storage"
)

// A stream route or a proxy listener that took the port of the admin API or
// of Caddy's admin endpoint would, after a restart, stop the gateway from
// starting or hand those ports' traffic to an upstream. Listener addresses
// are therefore checked against every listener the gateway knows of.

// namedAddr is a listener address and what it is, for messages.
type namedAddr struct{ what, addr string }

// reservedListeners are the listeners no configurable address may collide
// with: the gateway admin API (configured and bound) and Caddy's admin
// endpoint (every address it may be on; unix sockets cannot collide).
func (cp *ControlPlane) reservedListeners() []namedAddr {
	out := []namedAddr{{"the gateway admin API listener", cp.boot.AdminListen}}
	if a := cp.AdminAddr(); a != "" {
		out = append(out, namedAddr{"the gateway admin API listener", a})
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
	for _, a := range []string{cp.boot.CaddyAdmin, os.Getenv("CADDY_ADMIN"), caddy.DefaultAdminListen} {
		if caddyAdmin == "" {
			caddyAdmin = a
		}
	}
	if na, err := caddy.ParseNetworkAddress(caddyAdmin); err == nil && !na.IsUnixNetwork() && !na.IsFdNetwork() {
		out = append(out, namedAddr{"Caddy's admin endpoint", na.JoinHostPort(0)})
	}
	return out
}

// checkListenAddr refuses addr (the value of field) when it collides with
// the admin listeners, the proxy listeners of the settings in tx (unless
// checking the settings themselves) or a stream route other than selfID.
func (cp *ControlPlane) checkListenAddr(tx *gorm.DB, field, addr string, proxy bool, selfID int64) error {
	others := cp.reservedListeners()
	if proxy {
		var s storage.Settings
		if err := tx.Where("id = ?", 1).Limit(1).Find(&s).Error; err != nil {
			return fmt.Errorf("reading settings: %w", err)
		}
		if s.HTTPListen != "" {
			others = append(others, namedAddr{"the proxy HTTP listener (settings.http_listen)", s.HTTPListen})
		}
		others = append(others, namedAddr{"the proxy HTTPS listener (settings.https_listen)", s.HTTPSListen})
	}
	var routes []storage.StreamRoute
	if err := tx.Select("id", "listen_addr").Where("id <> ?", selfID).Find(&routes).Error; err != nil {
		return fmt.Errorf("reading stream routes: %w", err)
	}
	for _, r := range routes {
		others = append(others, namedAddr{fmt.Sprintf("stream route %d", r.ID), r.ListenAddr})
	}
	for _, o := range others {
		if storage.ListenersCollide(addr, o.addr) {
			return BadRequest(fmt.Sprintf("%s: %s collides with %s (%s)", field, addr, o.what, o.addr))
		}
	}
	return nil
}

// CheckSettings refuses settings whose proxy listeners collide with the
// admin listeners or a stream route (PUT /api/v1/settings and the import).
func CheckSettings(tx *gorm.DB, s *storage.Settings) error {
	cp := Current()
	if cp == nil {
		return nil
	}
	if s.HTTPListen != "" {
		if err := cp.checkListenAddr(tx, "http_listen", s.HTTPListen, false, 0); err != nil {
			return err
		}
	}
	if err := cp.checkListenAddr(tx, "https_listen", s.HTTPSListen, false, 0); err != nil {
		return err
	}
	return nil
}
