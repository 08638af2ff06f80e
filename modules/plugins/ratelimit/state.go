package ratelimit

import (
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/plugins/ratelimit/slidingwindow"
)

// counters holds the rate-limit counters of the process, keyed by plugin
// instance and limit key. They must outlive config reloads: every admin API
// mutation loads a fresh config, and counters that started over on each
// reload would let a client exceed its limit whenever anything changes.
// Memory is bounded by the store (idle keys swept, key count capped).
var counters = slidingwindow.NewStore(slidingwindow.DefaultMaxKeys)

// instances counts the provisioned plugin instances per counter prefix
// (see plugins.Holders): the counters stay across reloads and go with the
// last instance that holds them.
var instances = plugins.NewHolders(counters.Reset)
