package domain

import (
	"fmt"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/storage"
)

// checkListenAddr refuses addr (the value of field) when it collides with
// the admin listeners, the proxy listeners of the settings in tx and this
// node's own (unless checking the settings themselves) or a stream route
// other than selfID.
func checkListenAddr(cp *controlplane.ControlPlane, tx *gorm.DB, field, addr string, proxy bool, selfID int64) error {
	others := cp.ReservedListeners()
	if proxy {
		var s storage.Settings
		if err := tx.Where("id = ?", 1).Limit(1).Find(&s).Error; err != nil {
			return fmt.Errorf("reading settings: %w", err)
		}
		if s.HTTPListen != "" {
			others = append(others, controlplane.NamedAddr{What: "the proxy HTTP listener (settings.http_listen)", Addr: s.HTTPListen})
		}
		others = append(others, controlplane.NamedAddr{What: "the proxy HTTPS listener (settings.https_listen)", Addr: s.HTTPSListen})
		// This node's own proxy listeners replace the settings' (cluster
		// nodes on one host): a stream route on one would not bind.
		if b := cp.Boot(); b.NodeHTTPListen != "" {
			others = append(others, controlplane.NamedAddr{What: "this node's proxy HTTP listener (node_http_listen)", Addr: b.NodeHTTPListen})
		}
		if b := cp.Boot(); b.NodeHTTPSListen != "" {
			others = append(others, controlplane.NamedAddr{What: "this node's proxy HTTPS listener (node_https_listen)", Addr: b.NodeHTTPSListen})
		}
	}
	var routes []storage.StreamRoute
	if err := tx.Select("id", "listen_addr").Where("id <> ?", selfID).Find(&routes).Error; err != nil {
		return fmt.Errorf("reading stream routes: %w", err)
	}
	for _, r := range routes {
		others = append(others, controlplane.NamedAddr{What: fmt.Sprintf("stream route %d", r.ID), Addr: r.ListenAddr})
	}
	for _, o := range others {
		if storage.ListenersCollide(addr, o.Addr) {
			return api.BadRequest(fmt.Sprintf("%s: %s collides with %s (%s)", field, addr, o.What, o.Addr))
		}
	}
	return nil
}

// CheckSettings refuses settings whose proxy listeners collide with the
// admin listeners or a stream route (PUT /api/v1/settings and the import).
func CheckSettings(tx *gorm.DB, s *storage.Settings) error {
	cp := controlplane.Current()
	if cp == nil {
		return nil
	}
	if s.HTTPListen != "" {
		if err := checkListenAddr(cp, tx, "http_listen", s.HTTPListen, false, 0); err != nil {
			return err
		}
	}
	if err := checkListenAddr(cp, tx, "https_listen", s.HTTPSListen, false, 0); err != nil {
		return err
	}
	return nil
}
