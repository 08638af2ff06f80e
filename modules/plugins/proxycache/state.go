package proxycache

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/modules/plugins/proxycache/cachestore"
)

// cache holds the cached responses of the process, keyed by plugin instance
// (and its config) and request. It must outlive config reloads: every admin
// API mutation loads a fresh config, and a cache emptied on each reload
// would send a burst of misses to the upstreams after any change. Bounded
// by total bytes and entry count (LRU).
var cache = cachestore.New(cachestore.DefaultMaxBytes, cachestore.DefaultMaxEntries)

// instances counts the provisioned plugin instances per cache prefix, as
// Caddy's reverse_proxy counts its hosts: a reload provisions the new
// instance before the old one is cleaned up, so the entries stay; an
// instance gone from the config for good (or whose caching rules changed)
// releases its entries.
var instances = caddy.NewUsagePool()

// instanceEntries is one prefix's entry in the usage pool.
type instanceEntries string

// Destruct implements caddy.Destructor: the last instance with this prefix
// is gone.
func (p instanceEntries) Destruct() error {
	cache.PurgePrefix(string(p))
	return nil
}

// Purge removes every cached response of every proxy-cache plugin (POST
// /api/v1/cache/purge answers {purged: n} with its result) and returns how
// many were removed.
func Purge() int { return cache.Purge() }
