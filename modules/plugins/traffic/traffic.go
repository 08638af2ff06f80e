// Package traffic holds the gateway's traffic-policy plugin types: request-id,
// ip-restriction, cors, redirect, request-size-limit, request-termination,
// request-transform, response-transform, response-body-transform,
// response-compression and hsts (docs/plugins.md).
//
// Each type is one Caddy HTTP handler module (http.handlers.gateway_<type>)
// whose struct is the whole declaration of its config (see package plugins),
// and one Caddyfile directive (gateway_<type>) whose subdirectives are the
// config's JSON field names, parsed generically from the struct
// (plugins.UnmarshalCaddyfile).
package traffic

import (
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"

	"github.com/caddy-gateway/gateway/internal/placeholders"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// The package's plugin types (each type's struct is in its own file),
// registered in one call (see plugins.Register).
func init() {
	plugins.Register(
		plugins.Type{Name: "request-id", Ordering: 100, Doc: "Every request carries an id in a header, sent upstream and (echo_downstream) back to the client; it is also the request record's request_id and the placeholder {http.vars.request_id}.", New: func() plugins.Plugin { return new(RequestID) }},
		plugins.Type{Name: "ip-restriction", Ordering: 200, Doc: "Refuses clients by address (IPs or CIDRs); the client address honours the gateway's trusted_proxies. Deny wins over allow.", New: func() plugins.Plugin { return new(IPRestriction) }},
		plugins.Type{Name: "cors", Ordering: 300, Doc: "Answers CORS preflight requests itself (204, never proxied) and adds the CORS response headers to requests from allowed origins, replacing any the upstream sends. The upstream's own CORS headers never reach the client (an origin the plugin does not allow gets none), and every answer whose grant depends on the origin says Vary: Origin, answers to requests without one too.", New: func() plugins.Plugin { return new(CORS) }},
		plugins.Type{Name: "redirect", Ordering: 400, Doc: "Redirects plain-HTTP requests to HTTPS (to_https), or every request to another place (location).", New: func() plugins.Plugin { return new(Redirect) }},
		plugins.Type{Name: "request-size-limit", Ordering: 800, Doc: "413 for a request body over max_bytes, declared (Content-Length, refused before the upstream is contacted) or streamed (cut off while the upstream reads it).", New: func() plugins.Plugin { return new(RequestSizeLimit) }},
		plugins.Type{Name: "request-termination", Ordering: 900, Doc: "Answers every request itself, never proxying: {error: message} by default, or a raw body with content_type.", New: func() plugins.Plugin { return new(RequestTermination) }},
		plugins.Type{Name: "request-transform", Ordering: 1100, Doc: "Changes the headers (remove, rename, set, add) and query (remove, set) of the request the upstream receives; values may use Caddy placeholders. A request whose values make the values with placeholders longer than 64 KiB together is answered 431.", New: func() plugins.Plugin { return new(RequestTransform) }},
		plugins.Type{Name: "response-transform", Ordering: 1300, Doc: "Changes the headers of the response the client receives: remove, rename, set, add (in that order); values may use Caddy placeholders. Past 64 KiB of values with placeholders together for a request, the header that goes past it is left out, with a warning in the log (at most one a minute per plugin). Behind a proxy-cache (a lower ordering, as by default), values with placeholders make the response uncacheable (see proxy-cache).", New: func() plugins.Plugin { return new(ResponseTransform) }},
		plugins.Type{Name: "response-body-transform", Ordering: 1310, Doc: "Rewrites eligible response bodies (media type in content_types, at most max_body_bytes, identity/gzip/zstd encoded, not an event stream): regular-expression replacements, then for JSON bodies json_remove and json_set. Other responses stream through unchanged, and so does a body the replacements would make larger than 64 MiB; JSON nested more than 10000 levels deep is not JSON to json_remove and json_set.", New: func() plugins.Plugin { return new(ResponseBodyTransform) }},
		plugins.Type{Name: "response-compression", Ordering: 1400, Doc: "Compresses responses with Caddy's own encode handler (zstd, gzip), negotiated with the client's Accept-Encoding.", New: func() plugins.Plugin { return new(ResponseCompression) }},
		plugins.Type{Name: "hsts", Ordering: 1450, Doc: "Strict-Transport-Security on responses to HTTPS requests (never on plain HTTP); replaces an upstream's own header.", New: func() plugins.Plugin { return new(HSTS) }},
	)
}

// replacer is the request's Caddy replacer (a fresh one when the request did
// not come through a Caddy server).
func replacer(r *http.Request) *caddy.Replacer {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok && repl != nil {
		return repl
	}
	return caddy.NewReplacer()
}

// ---- header operations (request-transform, response-transform) ----

// HeaderTransform is the declaration of the header operations that
// request-transform and response-transform share (embedded in both).
type HeaderTransform struct {
	RemoveHeaders []string          `json:"remove_headers" schema:"header_name,maxItems=100" doc:"Header names to remove; a leading or trailing * is a wildcard (X-Internal-*)."`
	RenameHeaders map[string]string `json:"rename_headers" schema:"keys=header_name,header_name,maxItems=100" doc:"Old name → new name; the values move (replacing the new name's), absent headers are left alone."`
	SetHeaders    map[string]string `json:"set_headers" schema:"placeholders,keys=header_name,header_value,maxItems=100" doc:"Name → value, replacing existing values (in a request, a Host entry changes the upstream Host). Values may use the request's placeholders ({http.request.*} but its body, {http.vars.client_ip}, {http.vars.request_id}, {time.now*}); any other ({env.*}, {file.*} …) is 400; \\{ and \\} are literal braces. The values with placeholders (set_headers, add_headers and request-transform's set_query) together expand to at most 64 KiB per request: past it request-transform answers 431 naming the header, response-transform leaves the header out."`
	AddHeaders    map[string]string `json:"add_headers" schema:"placeholders,keys=header_name,header_value,maxItems=100" doc:"Name → value, added to existing values. Values may use the request's placeholders ({http.request.*} but its body, {http.vars.client_ip}, {http.vars.request_id}, {time.now*}); any other ({env.*}, {file.*} …) is 400; \\{ and \\} are literal braces. The values with placeholders (set_headers, add_headers and request-transform's set_query) together expand to at most 64 KiB per request: past it request-transform answers 431 naming the header, response-transform leaves the header out."`

	headers *headerOps // the operations, prepared by provision
}

func (t *HeaderTransform) setDefaults() {
	t.RemoveHeaders = []string{}
	t.RenameHeaders = map[string]string{}
	t.SetHeaders = map[string]string{}
	t.AddHeaders = map[string]string{}
}

// provision is the Provision of request-transform and response-transform
// (p, the plugin embedding t): it checks p with the admin API's rules
// (Caddy itself only calls Validate) and prepares the header operations.
func (t *HeaderTransform) provision(p any) error {
	if err := schema.Check(p); err != nil {
		return err
	}
	t.headers = newHeaderOps(t.RemoveHeaders, t.RenameHeaders, t.SetHeaders, t.AddHeaders)
	return nil
}

// maxExpanded bounds what the values with placeholders of one
// request-transform or response-transform (set_headers, add_headers,
// set_query) expand to for one request: their lengths together, in bytes.
// A value is up to 8,192 characters and may repeat a placeholder of a
// field the client chose (a 1 MB header 300 times in one value: 300 MB,
// times 100 values); 64 KiB is more than upstreams accept in all of a
// request's headers (Envoy 60 KiB, nginx 8–32 KiB), and a budget per
// request rather than per value keeps a plugin's worst case at that
// whatever the number of values.
const maxExpanded = 64 << 10

// budget is what remains of maxExpanded for one request.
type budget int

// expand is f's value for the request (placeholders.Expand), charged to b;
// false when it does not fit in what remains of b.
func (b *budget) expand(f field, repl *caddy.Replacer) (string, bool) {
	if !f.dynamic {
		return f.value, true
	}
	v, ok := placeholders.Expand(repl, f.value, int(*b))
	*b -= budget(len(v))
	return v, ok
}

// field is a configured (name, value): a header's canonical name or a
// query parameter's, and a value with placeholders (dynamic) or without.
type field struct {
	name, value string
	dynamic     bool
}

// newFields lists m's entries sorted by name (canonical header names when
// header), so that the budget is spent in the same order every time.
func newFields(m map[string]string, header bool) []field {
	fs := make([]field, 0, len(m))
	for _, k := range sortedKeys(m) {
		name := k
		if header {
			name = http.CanonicalHeaderKey(k)
		}
		// What Caddy's replacer returns unchanged: no brace.
		fs = append(fs, field{name, m[k], strings.ContainsAny(m[k], "{}")})
	}
	return fs
}

// headerOps are the header operations of request-transform and
// response-transform, applied in the order remove, rename, set, add (Kong's
// transformer order). remove is Caddy's own header operation (wildcard
// deletes); rename, set and add are ours: set and add expand their values
// with placeholders.Expand, which is Caddy's replacer bounded by maxExpanded.
type headerOps struct {
	remove *headers.HeaderOps
	rename [][2]string // canonical old, new

	// set is split: values without placeholders (canonical name, value),
	// assigned without the replacer and, in responses, in one allocation,
	// and the rest (dynamicSet).
	staticSet  [][2]string
	dynamicSet []field
	add        []field

	// placeholders: some set or add value has placeholders (the
	// request's values).
	placeholders bool

	// leftOut logs a response header left out because its values grow
	// past maxExpanded, at most once a minute (a client chooses when that
	// happens); nil for request-transform, whose request is refused.
	leftOut *zap.Logger
}

func newHeaderOps(remove []string, rename, set, add map[string]string) *headerOps {
	ops := &headerOps{}
	if len(remove) > 0 {
		ops.remove = &headers.HeaderOps{Delete: remove}
	}
	for _, old := range sortedKeys(rename) {
		ops.rename = append(ops.rename, [2]string{http.CanonicalHeaderKey(old), http.CanonicalHeaderKey(rename[old])})
	}
	for _, f := range newFields(set, true) {
		if !f.dynamic {
			ops.staticSet = append(ops.staticSet, [2]string{f.name, f.value})
			continue
		}
		ops.dynamicSet = append(ops.dynamicSet, f)
	}
	if len(add) > 0 {
		ops.add = newFields(add, true)
		for _, f := range ops.add {
			ops.placeholders = ops.placeholders || f.dynamic
		}
	}
	ops.placeholders = ops.placeholders || ops.dynamicSet != nil
	return ops
}

func (ops *headerOps) empty() bool {
	return ops.remove == nil && len(ops.rename) == 0 && len(ops.staticSet) == 0 &&
		len(ops.dynamicSet) == 0 && len(ops.add) == 0
}

// apply changes hdr (response headers). buf, when long enough, holds the
// values set without placeholders (the caller's per-request storage). A
// value past the request's budget is left out: a set header is removed
// (the upstream's value is not what the editor wanted either), an added
// one is not added. The response is decided by now, and the other headers
// are still right.
func (ops *headerOps) apply(hdr http.Header, repl *caddy.Replacer, buf []string) {
	ops.remove.ApplyTo(hdr, repl) // nil-safe
	ops.renameIn(hdr)
	if len(ops.staticSet) > 0 {
		// what Caddy's Set does for a value without placeholders, with
		// one backing array (each header's slice capacity-limited)
		vals := buf
		if len(vals) < len(ops.staticSet) {
			vals = make([]string, len(ops.staticSet))
		}
		for i, kv := range ops.staticSet {
			vals[i] = kv[1]
			hdr[kv[0]] = vals[i : i+1 : i+1]
		}
	}
	if len(ops.dynamicSet) == 0 && len(ops.add) == 0 {
		return
	}
	b := budget(maxExpanded)
	for _, f := range ops.dynamicSet {
		v, ok := b.expand(f, repl)
		if !ok {
			delete(hdr, f.name)
			ops.logLeftOut(f.name)
			continue
		}
		hdr[f.name] = []string{v}
	}
	for _, f := range ops.add {
		v, ok := b.expand(f, repl)
		if !ok {
			ops.logLeftOut(f.name)
			continue
		}
		hdr[f.name] = append(hdr[f.name], v)
	}
}

func (ops *headerOps) logLeftOut(name string) {
	if ops.leftOut != nil {
		ops.leftOut.Warn("response header left out: with this request's values its placeholders grow past the plugin's budget (logged at most once a minute)",
			zap.String("header", name), zap.Int("budget_bytes", maxExpanded))
	}
}

// applyToRequest changes r's headers (and r.Host for a Host header, as
// Caddy's HeaderOps.ApplyToRequest does), spending b. It returns the name
// of the first header whose value does not fit in b (r is then half
// changed, and not to be proxied), or "".
func (ops *headerOps) applyToRequest(r *http.Request, repl *caddy.Replacer, b *budget) string {
	if ops.remove != nil {
		ops.remove.ApplyToRequest(r)
	}
	ops.renameIn(r.Header)
	for _, kv := range ops.staticSet {
		setRequestHeader(r, kv[0], kv[1], false)
	}
	for _, f := range ops.dynamicSet {
		v, ok := b.expand(f, repl)
		if !ok {
			return f.name
		}
		setRequestHeader(r, f.name, v, false)
	}
	for _, f := range ops.add {
		v, ok := b.expand(f, repl)
		if !ok {
			return f.name
		}
		setRequestHeader(r, f.name, v, true)
	}
	return ""
}

// setRequestHeader sets (or adds) a request header; Host is r.Host (the
// last value wins, as with Caddy's ApplyToRequest).
func setRequestHeader(r *http.Request, name, value string, add bool) {
	switch {
	case name == "Host":
		r.Host = value
	case add:
		r.Header[name] = append(r.Header[name], value)
	default:
		r.Header[name] = []string{value}
	}
}

// renameIn moves the values of each old header to its new name (replacing
// what the new name held); absent headers are left alone.
func (ops *headerOps) renameIn(hdr http.Header) {
	for _, rn := range ops.rename {
		vals, ok := hdr[rn[0]]
		if !ok || rn[0] == rn[1] {
			continue
		}
		delete(hdr, rn[0])
		hdr[rn[1]] = vals
	}
}

// check validates the operations (what the tags cannot say).
func (t *HeaderTransform) check() error {
	for i, name := range t.RemoveHeaders {
		if !validHeaderPattern(name) {
			return schema.Errorf(idx("remove_headers", i), "must be a header name (a leading or trailing * is a wildcard)")
		}
	}
	for _, k := range sortedKeys(t.RenameHeaders) {
		if !httpguts.ValidHeaderFieldName(k) {
			return schema.Errorf("rename_headers."+k, "key must be a valid header name")
		}
		if !httpguts.ValidHeaderFieldName(t.RenameHeaders[k]) {
			return schema.Errorf("rename_headers."+k, "must be a valid header name")
		}
	}
	for field, m := range map[string]map[string]string{"set_headers": t.SetHeaders, "add_headers": t.AddHeaders} {
		for _, k := range sortedKeys(m) {
			if !httpguts.ValidHeaderFieldName(k) {
				return schema.Errorf(field+"."+k, "key must be a valid header name")
			}
			if !httpguts.ValidHeaderFieldValue(m[k]) {
				return schema.Errorf(field+"."+k, "must be a valid header value (no control characters)")
			}
		}
	}
	return nil
}

func validHeaderPattern(s string) bool {
	if s == "*" {
		return true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "*"), "*")
	return httpguts.ValidHeaderFieldName(s)
}

// ---- response writer hooks ----

// headerHook runs its applier on the response header just before the
// final status line is written (once; not for 1xx informational
// responses), so what it sets wins over what the upstream sent. Caddy's
// wrapper is embedded by value and a plugin's per-request state can embed
// the hook and be its own applier: one allocation per request, no closure.
type headerHook struct {
	caddyhttp.ResponseWriterWrapper
	apply headerApplier
	done  bool
}

// headerApplier changes a response header (headerHook).
type headerApplier interface{ applyHeader(http.Header) }

// headerFunc is a function as a headerApplier.
type headerFunc func(http.Header)

func (f headerFunc) applyHeader(h http.Header) { f(h) }

func newHeaderHook(w http.ResponseWriter, fn func(http.Header)) *headerHook {
	return &headerHook{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, apply: headerFunc(fn)}
}

func (w *headerHook) WriteHeader(status int) {
	if !w.done && (status >= 200 || status == http.StatusSwitchingProtocols) {
		w.done = true
		w.apply.applyHeader(w.Header())
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *headerHook) Write(p []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *headerHook) ReadFrom(r io.Reader) (int64, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriterWrapper.ReadFrom(r)
}

// FlushError implements the interface http.ResponseController looks for.
func (w *headerHook) FlushError() error {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// ---- small helpers ----

func idx(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
