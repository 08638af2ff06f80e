// Package domain holds the rules that span resources: the references a route
// or stream route must satisfy, listener addresses that must not collide,
// and what a delete takes with it. The admin API's handlers and the
// configuration import (package backup) call the same functions, so a
// document is accepted exactly when the same calls would be. Beside the
// tests here, the API tests in app/tests (input, streams, settings)
// and backup's exercise it.
package domain

import (
	"fmt"
	"strconv"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/storage"
)

// CheckRoute validates a route's references inside tx (POST and PUT
// /api/v1/routes, the configuration import).
func CheckRoute(tx *gorm.DB, r *storage.Route) error {
	if err := api.Exists[storage.Service](tx, "service_id", r.ServiceID); err != nil {
		return err
	}
	for i, s := range r.Splits {
		if err := api.Exists[storage.Service](tx, "splits["+strconv.Itoa(i)+"].service_id", s.ServiceID); err != nil {
			return err
		}
	}
	return nil
}

// CheckStreamRoute validates a stream route's references and listen_addr
// uniqueness inside tx (POST and PUT /api/v1/stream-routes, the
// configuration import).
func CheckStreamRoute(tx *gorm.DB, sr *storage.StreamRoute) error {
	if err := api.Exists[storage.Service](tx, "service_id", sr.ServiceID); err != nil {
		return err
	}
	var other storage.StreamRoute
	err := tx.Where("listen_addr = ? AND id <> ?", sr.ListenAddr, sr.ID).First(&other).Error
	if err == nil {
		return api.BadRequest(fmt.Sprintf("listen_addr: %s is already used by stream route %d", sr.ListenAddr, other.ID))
	}
	if !storage.IsNotFound(err) {
		return err
	}
	if cp := controlplane.Current(); cp != nil {
		return checkListenAddr(cp, tx, "listen_addr", sr.ListenAddr, true, sr.ID)
	}
	return nil
}
