package guard

import (
	"net/http"
	"net/textproto"
	"strings"
)

// The admin API's cookies (package app/auth sets them): the session,
// and the SSO sign-in's binding to its browser.
const (
	SessionCookie = "gateway_session"
	SSOCookie     = "gateway_sso"
)

// DropAdminCookies removes the admin API's cookies from a request's Cookie
// header before it is proxied. Cookies are not bound to a port: a browser
// signed in to the dashboard at 127.0.0.1:9080 sends its session cookie
// with every request to the proxy at 127.0.0.1:8080 too, and the proxy
// would hand it to the upstream, whose owner (an editor may point a route
// anywhere) could then call the admin API as that user.
func DropAdminCookies(h http.Header) {
	rewrite(h, "Cookie", func(v string) string {
		var pairs []string
		for p := range strings.SplitSeq(v, ";") {
			if p = textproto.TrimString(p); p != "" && !isAdminCookie(p) {
				pairs = append(pairs, p)
			}
		}
		return strings.Join(pairs, "; ")
	})
}

// DropAdminSetCookies removes from a proxied response's header the
// Set-Cookie lines that would set, replace or delete the admin API's
// cookies. The browser keeps one cookie jar per host name whatever the
// port, so an upstream (or a plugin's header) could otherwise plant its
// owner's session in an administrator's browser (the dashboard then acts
// as that account: session fixation), plant an SSO binding (login CSRF),
// or sign the administrator out. A nameless cookie ("=gateway_session=x")
// counts too: browsers send it as its value alone, which reads as the
// named one.
func DropAdminSetCookies(h http.Header) {
	rewrite(h, "Set-Cookie", func(v string) string {
		pair, _, _ := strings.Cut(v, ";")
		pair = textproto.TrimString(pair)
		if rest, nameless := strings.CutPrefix(pair, "="); nameless {
			pair = rest
		}
		if isAdminCookie(pair) {
			return ""
		}
		return v
	})
}

// rewrite replaces each value of h[key] by edit's result, dropping empty
// ones (and the key when none is left), when a value may name an admin
// cookie: the common case costs a substring test and no allocation.
func rewrite(h http.Header, key string, edit func(string) string) {
	vals, ok := h[key]
	if !ok || !hasAdminCookie(vals) {
		return
	}
	kept := make([]string, 0, len(vals))
	for _, v := range vals {
		if v = edit(v); v != "" {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		delete(h, key)
		return
	}
	h[key] = kept
}

// isAdminCookie tells whether a cookie pair (name=value) is one of the
// admin API's cookies.
func isAdminCookie(pair string) bool {
	name, _, _ := strings.Cut(pair, "=")
	name = textproto.TrimString(name)
	return name == SessionCookie || name == SSOCookie
}

// hasAdminCookie tells, without allocating, whether a Cookie or Set-Cookie
// header may carry one of the admin cookies (both names start with "gateway_s").
func hasAdminCookie(vals []string) bool {
	for _, v := range vals {
		if strings.Contains(v, "gateway_s") {
			return true
		}
	}
	return false
}
