package ratelimit

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/modules/plugins/ratelimit/slidingwindow"
)

// counters holds the rate-limit counters of the process, keyed by plugin
// instance and limit key. They must outlive config reloads: every admin API
// mutation loads a fresh config, and counters that started over on each
// reload would let a client exceed its limit whenever anything changes.
// Memory is bounded by the store (idle keys swept, key count capped).
var counters = slidingwindow.NewStore(slidingwindow.DefaultMaxKeys)

// instances counts the provisioned plugin instances per counter prefix, as
// Caddy's reverse_proxy counts its hosts: a reload provisions the new
// instance before the old one is cleaned up, so the count never drops to
// zero and the counters stay; an instance gone from the config for good
// (or a stopped server) releases its counters.
var instances = caddy.NewUsagePool()

// instanceCounters is one prefix's entry in the usage pool.
type instanceCounters string

// Destruct implements caddy.Destructor: the last instance with this prefix
// is gone.
func (p instanceCounters) Destruct() error {
	counters.Reset(string(p))
	return nil
}
