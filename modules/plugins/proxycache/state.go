package proxycache

import (
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/plugins/proxycache/cachestore"
)

// cache holds the cached responses of the process, keyed by plugin instance
// (and its config) and request. It must outlive config reloads: every admin
// API mutation loads a fresh config, and a cache emptied on each reload
// would send a burst of misses to the upstreams after any change. Bounded
// by total bytes and entry count (LRU).
var cache = cachestore.New(cachestore.DefaultMaxBytes, cachestore.DefaultMaxEntries)

// instances counts the provisioned plugin instances per cache prefix (see
// plugins.Holders): the entries stay across reloads and go with the last
// instance that holds them (or when its caching rules change: they are
// part of the prefix).
var instances = plugins.NewHolders(cache.PurgePrefix)

// Purge removes every cached response of every proxy-cache plugin (POST
// /api/v1/cache/purge answers {purged: n} with its result) and returns how
// many were removed.
func Purge() int { return cache.Purge() }
