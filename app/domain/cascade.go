package domain

import (
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/storage"
)

// What a delete takes with it is declared once, as foreign keys with ON
// DELETE CASCADE on the stored models (package storage): a service's
// targets, routes, stream routes and plugins, a route's plugins, a
// consumer's credentials, a user's sessions. The one reference no foreign
// key can hold is a split entry inside a route's JSON column; that is code.

// RemoveSplitsTo removes the split entries that send traffic to service id
// from the other routes (a route left with none sends all its traffic to
// its own service_id). Run it in the service's delete transaction.
func RemoveSplitsTo(tx *gorm.DB, id int64) error {
	var withSplits []storage.Route
	if err := tx.Where("splits IS NOT NULL AND splits NOT IN ?", []string{"", "[]", "null"}).Find(&withSplits).Error; err != nil {
		return err
	}
	for _, r := range withSplits {
		kept := r.Splits[:0]
		for _, s := range r.Splits {
			if s.ServiceID != id {
				kept = append(kept, s)
			}
		}
		if len(kept) != len(r.Splits) {
			r.Splits = kept
			if err := tx.Save(&r).Error; err != nil {
				return err
			}
		}
	}
	return nil
}
