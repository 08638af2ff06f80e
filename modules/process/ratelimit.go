package process

import "github.com/caddy-gateway/gateway/modules/plugins/ratelimit/slidingwindow"

// RateLimits holds the rate-limit plugin's counters, keyed by plugin
// instance and limit key. They must outlive config reloads: every admin API
// mutation loads a fresh config, and counters that started over on each
// reload would let a client exceed its limit whenever anything changes.
// Memory is bounded by the store (idle keys swept, key count capped).
var RateLimits = slidingwindow.NewStore(slidingwindow.DefaultMaxKeys)
