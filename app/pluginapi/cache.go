package pluginapi

import (
	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/modules/plugins/proxycache"
)

// PurgeProxyCache empties the process-wide proxy-cache store and returns how
// many cached responses it removed (POST /api/v1/cache/purge).
var PurgeProxyCache = proxycache.Purge

// PurgeResult is the answer of POST /api/v1/cache/purge.
type PurgeResult struct {
	Purged int `json:"purged" doc:"How many cached responses were removed."`
}

func purgeCache(*api.Call) (any, error) {
	return PurgeResult{Purged: PurgeProxyCache()}, nil
}
