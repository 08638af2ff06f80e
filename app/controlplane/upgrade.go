package controlplane

import (
	"fmt"

	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// clampStoredBounds lowers the stored numbers that are above a maximum
// added after they were written (an upgraded store; docs/operations.md,
// Upgrading) to that maximum, makes the placeholders plugin values may no
// longer use literal text (plugins.UpgradeStored), and logs each change.
// The plugin types' rules are checked when a configuration loads, so one
// such value (a cors max_age_s above a day, an hsts max_age_s above ten
// years, {env.TOKEN} in a request-transform header) kept the whole
// gateway from loading after an upgrade, and each change made through
// the API was refused while another such plugin remained. The
// services' and targets' maxima are the API's only: they are lowered too
// so that the store's export imports again.
func clampStoredBounds(db *gorm.DB, logger *zap.Logger) error {
	return db.Transaction(func(tx *gorm.DB) error {
		var ps []storage.Plugin
		if err := tx.Order("id").Find(&ps).Error; err != nil {
			return fmt.Errorf("reading plugins: %w", err)
		}
		for _, p := range ps {
			cfg, names, err := plugins.UpgradeStored(p.Type, p.Config)
			if err != nil {
				return fmt.Errorf("plugin %d: %w", p.ID, err)
			}
			if len(names) == 0 {
				continue
			}
			if err := tx.Model(&storage.Plugin{}).Where("id = ?", p.ID).UpdateColumn("config", string(cfg)).Error; err != nil {
				return fmt.Errorf("plugin %d: %w", p.ID, err)
			}
			logger.Warn("stored plugin config refused by today's rules: changed to pass them (numbers above a maximum lowered to it, placeholders no longer allowed made literal)",
				zap.Int64("plugin", p.ID), zap.String("type", p.Type), zap.Strings("fields", names),
				zap.ByteString("was", p.Config), zap.ByteString("now", cfg))
		}
		if err := clampRows(tx, logger, "service", func(r *storage.Service) int64 { return r.ID }); err != nil {
			return err
		}
		return clampRows(tx, logger, "target", func(r *storage.Target) int64 { return r.ID })
	})
}

// clampRows lowers the numbers of every row of T above their maximum
// (schema.ClampMax; the JSON names are the column names).
func clampRows[T any](tx *gorm.DB, logger *zap.Logger, what string, id func(*T) int64) error {
	var rows []T
	if err := tx.Order("id").Find(&rows).Error; err != nil {
		return fmt.Errorf("reading %ss: %w", what, err)
	}
	for i := range rows {
		names := schema.ClampMax(&rows[i])
		if len(names) == 0 {
			continue
		}
		if err := tx.Model(&rows[i]).Select(names).UpdateColumns(&rows[i]).Error; err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		logger.Warn("stored "+what+" value above today's maximum: lowered to it",
			zap.Int64(what, id(&rows[i])), zap.Strings("fields", names))
	}
	return nil
}
