package process

import "github.com/caddy-gateway/gateway/modules/plugins/proxycache/cachestore"

// ProxyCache holds the proxy-cache plugin's cached responses, keyed by plugin
// instance (and its config) and request. It must outlive config reloads:
// every admin API mutation loads a fresh config, and a cache emptied on each
// reload would send a burst of misses to the upstreams after any change.
// Bounded by total bytes and entry count (LRU).
var ProxyCache = cachestore.New(cachestore.DefaultMaxBytes, cachestore.DefaultMaxEntries)

// PurgeProxyCache removes every cached response of every proxy-cache plugin
// (POST /api/v1/cache/purge answers {purged: n} with its result) and returns
// how many were removed.
func PurgeProxyCache() int { return ProxyCache.Purge() }
