package router

import (
	"errors"
	"fmt"
	"strings"
)

// MaxPathBytes is the longest request path (decoded) the router matches.
// Matching a path against a route's regular expressions costs time in
// proportion to its length, and Go's server accepts request lines up to
// its 1 MB header limit: a long path sent to a gateway with regex routes
// would cost any client's request tens of milliseconds of a core, the
// dry run's too. nginx (and so Kong) answers request lines past its 8 KiB
// buffers with 414 as well.
const MaxPathBytes = 8192

// Errors of NormalizePath; the router answers ErrPathTooLong with 414 and
// the others with 400.
var (
	ErrPathTooLong   = fmt.Errorf("the path is longer than %d bytes", MaxPathBytes)
	ErrPathControl   = errors.New("the path has control characters")
	ErrPathBackslash = errors.New("the path has a dot segment delimited by a backslash")
	ErrPathParams    = errors.New("the path's ;parameters change the route it matches")
)

// ErrMethodOverride is Table.Resolve's answer to a request whose method
// override header names a method another route (or none) serves; the
// router answers it with 400.
var ErrMethodOverride = errors.New("a method override header (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override) names a method that changes the route the request matches")

// NormalizePath is the path the router matches and forwards: the decoded
// request path (r.URL.Path, where %2e%2e is already ".." and %2F already
// "/") with its dot segments removed as RFC 3986 §5.2.4 says, so that
// /public/../private is matched, authorized and forwarded as /private,
// never as a /public request that an upstream resolves to /private.
//
// The rules:
//   - "." segments are dropped and ".." removes the segment before it;
//     ".." at the root stays at the root (/../x is /x), as the RFC says;
//     a trailing "." or ".." leaves a trailing slash (/a/b/.. is /a/).
//   - Runs of slashes are merged first (//admin is /admin, /a//../b is
//     /b), as nginx (merge_slashes) and Traefik do: an upstream behind
//     such a server serves //admin as /admin, so it must be matched and
//     authorized as /admin, not by a catch-all route.
//   - A path with control characters (decoded %00-%1F, %7F) cannot be
//     forwarded safely and is refused, and so is one longer than
//     MaxPathBytes.
//   - A backslash is an ordinary character, except that a path in which a
//     backslash delimits a "." or ".." segment (/public\..\private) is
//     refused: some upstreams treat backslashes as separators.
//   - A path that does not start with "/" (the "*" of OPTIONS *) is
//     returned unchanged.
//
// The result never contains a dot segment, and NormalizePath of the result
// is the result. The dry run of /api/v1/router/test calls this function as
// the router does.
func NormalizePath(p string) (string, error) {
	if len(p) > MaxPathBytes {
		return "", ErrPathTooLong
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f {
			return "", ErrPathControl
		}
	}
	if p == "" || p[0] != '/' {
		return p, nil
	}
	if strings.Contains(p, "//") {
		p = mergeSlashes(p)
	}
	if strings.Contains(p, "/.") {
		p = removeDotSegments(p)
	}
	if strings.IndexByte(p, '\\') >= 0 && hasDotSegment(p, "/\\") {
		return "", ErrPathBackslash
	}
	return p, nil
}

// mergeSlashes replaces every run of slashes in p with one.
func mergeSlashes(p string) string {
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && i > 0 && p[i-1] == '/' {
			continue
		}
		b = append(b, p[i])
	}
	return string(b)
}

// removeDotSegments is RFC 3986 §5.2.4 on an absolute path, segment by
// segment.
func removeDotSegments(p string) string {
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
			continue
		}
		if last {
			out = append(out, "") // keep the trailing slash
		}
	}
	return "/" + strings.Join(out, "/")
}

// hasDotSegment reports whether p, split at any of seps, has a "." or ".."
// segment.
func hasDotSegment(p, seps string) bool {
	for _, s := range strings.FieldsFunc(p, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
		if s == "." || s == ".." {
			return true
		}
	}
	return false
}

// cutParams removes each segment's ";parameters" (/a;x=1/..;/b is
// /a/../b), as Tomcat, Jetty and Spring read a path before they resolve
// its dot segments.
func cutParams(p string) string {
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == ';' {
			for i < len(p) && p[i] != '/' {
				i++
			}
			if i == len(p) {
				break
			}
		}
		b = append(b, p[i])
	}
	return string(b)
}
