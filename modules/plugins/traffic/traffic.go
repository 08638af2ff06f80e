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
	"golang.org/x/net/http/httpguts"

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
		plugins.Type{Name: "request-transform", Ordering: 1100, Doc: "Changes the headers (remove, rename, set, add) and query (remove, set) of the request the upstream receives; values may use Caddy placeholders.", New: func() plugins.Plugin { return new(RequestTransform) }},
		plugins.Type{Name: "response-transform", Ordering: 1300, Doc: "Changes the headers of the response the client receives: remove, rename, set, add (in that order); values may use Caddy placeholders. Behind a proxy-cache (a lower ordering, as by default), values with placeholders make the response uncacheable (see proxy-cache).", New: func() plugins.Plugin { return new(ResponseTransform) }},
		plugins.Type{Name: "response-body-transform", Ordering: 1310, Doc: "Rewrites eligible response bodies (media type in content_types, at most max_body_bytes, identity/gzip/zstd encoded): regular-expression replacements, then for JSON bodies json_remove and json_set. Other responses stream through unchanged, and so does a body the replacements would make larger than 64 MiB; JSON nested more than 10000 levels deep is not JSON to json_remove and json_set.", New: func() plugins.Plugin { return new(ResponseBodyTransform) }},
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
	SetHeaders    map[string]string `json:"set_headers" schema:"placeholders,keys=header_name,header_value,maxItems=100" doc:"Name → value, replacing existing values (in a request, a Host entry changes the upstream Host). Values may use the request's placeholders ({http.request.*} but its body, {http.vars.client_ip}, {http.vars.request_id}, {time.now*}); any other ({env.*}, {file.*} …) is 400; \\{ and \\} are literal braces."`
	AddHeaders    map[string]string `json:"add_headers" schema:"placeholders,keys=header_name,header_value,maxItems=100" doc:"Name → value, added to existing values. Values may use the request's placeholders ({http.request.*} but its body, {http.vars.client_ip}, {http.vars.request_id}, {time.now*}); any other ({env.*}, {file.*} …) is 400; \\{ and \\} are literal braces."`

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

// headerOps are the header operations of request-transform and
// response-transform, applied in the order remove, rename, set, add (Kong's
// transformer order). remove, set and add are Caddy's own header operations
// (wildcard deletes, placeholders in values, the Host special case); rename
// is ours.
type headerOps struct {
	remove, set, add *headers.HeaderOps
	rename           [][2]string // canonical old, new

	// For responses (apply), set is split: values without placeholders
	// (canonical name, value), assigned without the replacer and in one
	// allocation, and the rest (dynamicSet, nil when none).
	staticSet  [][2]string
	dynamicSet *headers.HeaderOps

	// placeholders: some set or add value has placeholders (the
	// request's values).
	placeholders bool
}

func newHeaderOps(remove []string, rename, set, add map[string]string) *headerOps {
	ops := &headerOps{}
	if len(remove) > 0 {
		ops.remove = &headers.HeaderOps{Delete: remove}
	}
	for _, old := range sortedKeys(rename) {
		ops.rename = append(ops.rename, [2]string{http.CanonicalHeaderKey(old), http.CanonicalHeaderKey(rename[old])})
	}
	if len(set) > 0 {
		ops.set = &headers.HeaderOps{Set: http.Header{}}
		for k, v := range set {
			ops.set.Set.Set(k, v)
		}
		for k, vals := range ops.set.Set {
			if v := vals[0]; !strings.ContainsAny(k+v, "{}\\") {
				ops.staticSet = append(ops.staticSet, [2]string{k, v})
				continue
			}
			if ops.dynamicSet == nil {
				ops.dynamicSet = &headers.HeaderOps{Set: http.Header{}}
			}
			ops.dynamicSet.Set[k] = vals
		}
	}
	if len(add) > 0 {
		ops.add = &headers.HeaderOps{Add: http.Header{}}
		for k, v := range add {
			ops.add.Add.Add(k, v)
			ops.placeholders = ops.placeholders || strings.ContainsAny(k+v, "{}\\")
		}
	}
	ops.placeholders = ops.placeholders || ops.dynamicSet != nil
	return ops
}

func (ops *headerOps) empty() bool {
	return ops.remove == nil && ops.set == nil && ops.add == nil && len(ops.rename) == 0
}

// apply changes hdr (response headers). buf, when long enough, holds the
// values set without placeholders (the caller's per-request storage).
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
	ops.dynamicSet.ApplyTo(hdr, repl)
	ops.add.ApplyTo(hdr, repl)
}

// applyToRequest changes r's headers (and r.Host for a Host header).
func (ops *headerOps) applyToRequest(r *http.Request) {
	if ops.remove != nil {
		ops.remove.ApplyToRequest(r)
	}
	ops.renameIn(r.Header)
	if ops.set != nil {
		ops.set.ApplyToRequest(r)
	}
	if ops.add != nil {
		ops.add.ApplyToRequest(r)
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
