package plugins

import "github.com/caddyserver/caddy/v2/modules/caddyhttp"

// Gate is a plugin type that decides whether a request may go on by who
// sends it or from where: the auth plugins (which also identify the
// consumer), acl, ip-restriction.
type Gate interface {
	caddyhttp.MiddlewareHandler
	// GatesAccess marks the type; it does nothing.
	GatesAccess()
}

// Cache is a plugin type that answers requests with responses stored for
// earlier ones (proxy-cache).
type Cache interface {
	caddyhttp.MiddlewareHandler
	// AnswersFromStore marks the type; it does nothing.
	AnswersFromStore()
}

// Arrange returns the handlers of a plugin chain (given in ascending
// ordering) in the order they run: as given, except that a Cache placed
// before a Gate runs right after the chain's last Gate instead. A cache
// that answered before the access decisions were made would hand a
// response stored for one consumer (or one allowed client) to anyone,
// whatever its key; after them, the authenticated consumer is part of
// its key. The others keep their relative order. hs is not changed.
func Arrange(hs []caddyhttp.MiddlewareHandler) []caddyhttp.MiddlewareHandler {
	last := -1
	for i, h := range hs {
		if _, ok := h.(Gate); ok {
			last = i
		}
	}
	var moved []caddyhttp.MiddlewareHandler
	for i, h := range hs[:max(last, 0)] {
		if _, ok := h.(Cache); ok && i < last {
			moved = append(moved, h)
		}
	}
	if len(moved) == 0 {
		return hs
	}
	out := make([]caddyhttp.MiddlewareHandler, 0, len(hs))
	for i, h := range hs {
		if _, ok := h.(Cache); !ok || i > last {
			out = append(out, h)
		}
		if i == last {
			out = append(out, moved...)
		}
	}
	return out
}
