package cluster

import (
	"encoding/json"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/modules/plugins/ratelimit/shared"
	"github.com/caddy-gateway/gateway/schema"
)

// RateLimitRefs checks that a rate-limit plugin's policy has its store
// here: redis needs the gateway's Redis connection, cluster the PostgreSQL
// store. A plugin without it is refused (400) and skipped on import.
var RateLimitRefs = controlplane.PluginRefs{Check: checkRateLimit}

func checkRateLimit(tx *gorm.DB, config json.RawMessage) error {
	var c struct {
		Policy string `json:"policy"`
	}
	_ = json.Unmarshal(config, &c) // normalized already
	switch c.Policy {
	case "redis":
		if shared.Redis() == nil {
			return &controlplane.Unsupported{FieldError: &schema.FieldError{Field: "config.policy",
				Msg: "redis needs the gateway's Redis connection, and none is configured (Caddyfile: gateway { redis <url> }; the shipped Caddyfile reads GATEWAY_REDIS_URL)"}}
		}
	case "cluster":
		if tx.Dialector.Name() != "postgres" {
			return &controlplane.Unsupported{FieldError: &schema.FieldError{Field: "config.policy",
				Msg: "cluster counts in the PostgreSQL store the nodes share, and this gateway runs on SQLite (use local, or redis)"}}
		}
	}
	return nil
}

// ConfigureRateLimits gives the cluster policy the PostgreSQL store (a
// pool of its own on the store's DSN); on SQLite it has none.
func ConfigureRateLimits(cp *controlplane.ControlPlane) error {
	if cp.Store().Kind != "postgres" {
		return shared.ConfigurePostgres("")
	}
	return shared.ConfigurePostgres(cp.Boot().StoreDSN())
}
