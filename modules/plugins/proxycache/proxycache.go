// Package proxycache holds the gateway's proxy-cache plugin type: upstream
// responses kept in memory and served again until they expire. Entries live
// in the package's process-wide store (state.go), held by the instances that
// use it, so they survive config reloads; Purge empties it.
package proxycache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"golang.org/x/net/http/httpguts"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/plugins/proxycache/cachestore"
	"github.com/caddy-gateway/gateway/schema"
)

func init() {
	plugins.Register(plugins.Type{Name: "proxy-cache", Ordering: 1000, Doc: "Keeps upstream responses in memory and serves them again until they expire; the X-Cache-Status response header tells what the cache did. Entries survive config reloads; POST /api/v1/cache/purge empties the cache. A response that a response-transform running after it (a higher ordering, as by default) fills in with placeholders (the request's values) is not stored (Bypass): a hit runs no plugin after the cache, and would give the next client the first one's values. The cache never answers before the route's access plugins (key-auth, basic-auth, jwt, acl, ip-restriction) have run, whatever its ordering: in a chain with one of them it runs right after the last of them even when its ordering is lower (the ordering is kept as given, not refused, because the chain is only known per request: global, service and route plugins combine). The consumer an auth plugin identified is then part of the key, so a response cached for one consumer is never served to another nor to a client that fails authentication. An auth plugin running inside the cache (a Caddyfile route that orders it so) makes the response uncacheable.", New: func() plugins.Plugin { return new(ProxyCache) }})
}

// Header is the response header telling what the cache did.
const Header = "X-Cache-Status"

// ProxyCache is the proxy-cache plugin.
type ProxyCache struct {
	TTLS                int64    `json:"ttl_s" schema:"min=1,max=31536000" doc:"Seconds a response is kept, unless its Cache-Control says otherwise (honor_cache_control)."`
	Methods             []string `json:"methods" schema:"minItems=1,maxItems=32,maxLength=32" doc:"Request methods whose responses are cached."`
	StatusCodes         []int    `json:"status_codes" schema:"minItems=1,min=100,max=599" doc:"Response statuses that are cached."`
	ContentTypes        []string `json:"content_types" schema:"maxItems=100,maxLength=255" doc:"Media types cached (type/subtype or type/*); empty: any."`
	MaxBodyBytes        int64    `json:"max_body_bytes" schema:"min=0,max=1073741824" doc:"Larger responses are not cached. The cache of the process holds at most 128 MiB and 50000 entries (least recently used out), and never stores a response over a quarter of that (32 MiB), whatever this says; a body of unknown length (chunked) is kept only while it could still be stored, the rest streams through."`
	VaryHeaders         []string `json:"vary_headers" schema:"header_name,minLength=1,maxItems=32" doc:"Request headers whose values are part of the cache key."`
	HonorCacheControl   bool     `json:"honor_cache_control" doc:"Obey Cache-Control: a request's no-cache/no-store bypasses the cache; a response's no-store, private, no-cache are not stored, its s-maxage/max-age set the TTL."`
	CacheCookieRequests bool     `json:"cache_cookie_requests" doc:"Serve and store requests that carry Cookie too. By default they bypass the cache (Bypass), as requests with Authorization do unless an auth plugin identified the consumer: a response to one may be personal. When true, cookies are not part of the key unless vary_headers lists Cookie. Whatever this says, a response with Set-Cookie, or whose Vary names Cookie or *, is never stored."`

	plugins.Instance
	plugins.Held

	store  *cachestore.Store
	prefix string
	ctypes []string
	vary   []string // canonical header names
}

// CaddyModule returns the Caddy module information.
func (*ProxyCache) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[ProxyCache]("proxy-cache")
}

// Provision implements caddy.Provisioner.
func (p *ProxyCache) Provision(caddy.Context) error {
	if err := schema.Check(p); err != nil {
		return err
	}
	p.store = cache
	p.ctypes = p.ctypes[:0]
	for _, ct := range p.ContentTypes {
		p.ctypes = append(p.ctypes, mediaType(ct))
	}
	p.vary = p.vary[:0]
	for _, h := range p.VaryHeaders {
		p.vary = append(p.vary, http.CanonicalHeaderKey(h))
	}
	slices.Sort(p.vary)
	p.prefix = p.instanceKey()
	p.Held = instances.Hold(p.prefix) // Cleanup releases the entries
	return nil
}

// instanceKey is the store key prefix of this plugin instance: its id (or,
// standalone, nothing) and a hash of its settings, so that changed caching
// rules start with a fresh cache while unrelated reloads keep it.
func (p *ProxyCache) instanceKey() string {
	cfg, _ := json.Marshal(struct {
		TTL    int64
		M      []string
		S      []int
		C      []string
		Max    int64
		V      []string
		Honour bool
		Cookie bool
	}{p.TTLS, p.Methods, p.StatusCodes, p.ctypes, p.MaxBodyBytes, p.vary, p.HonorCacheControl, p.CacheCookieRequests})
	sum := sha256.Sum256(cfg)
	return "pc:" + strconv.FormatInt(p.InstanceID, 10) + ":" + hex.EncodeToString(sum[:8]) + ":"
}

// Validate implements caddy.Validator and schema.Validator.
func (p *ProxyCache) Validate() error {
	for i, m := range p.Methods {
		if !isToken(m) || strings.ToUpper(m) != m {
			return schema.Errorf("methods["+strconv.Itoa(i)+"]", "must be an upper-case HTTP method")
		}
	}
	for i, ct := range p.ContentTypes {
		mt := mediaType(ct)
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok || !isToken(typ) || (sub != "*" && !isToken(sub)) {
			return schema.Errorf("content_types["+strconv.Itoa(i)+"]", "must be a media type (type/subtype or type/*)")
		}
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (p *ProxyCache) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	store := p.store
	if store == nil {
		store = cache
	}
	if reason := p.bypass(r); reason != "" {
		w.Header().Set(Header, "Bypass")
		return next.ServeHTTP(w, r)
	}
	base := p.baseKey(r)
	key := base
	e, ok := store.Get(base)
	if ok && e.VaryNames != nil {
		key = variantKey(base, e.VaryNames, r)
		e, ok = store.Get(key)
	}
	if ok && !tooOld(r, e) {
		serveEntry(w, r, e)
		return nil
	}

	w.Header().Set(Header, "Miss")
	before := w.Header().Clone()
	// A body is kept while it can still be stored: up to max_body_bytes,
	// and never past what the store accepts (the rest streams through).
	limit := min(p.MaxBodyBytes, store.MaxEntryBytes())
	// Uncacheable: what the plugins after this one set (a plugin before
	// it changes the response outside the cache).
	info, r := gwctx.Ensure(r)
	info.Uncacheable = false
	rec := &recorder{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, p: p, info: info, consumer: info.Consumer, before: before, limit: limit}
	if err := next.ServeHTTP(rec, r); err != nil {
		return err
	}
	if !rec.storable || rec.overflow {
		return nil
	}
	now := time.Now()
	entry := &cachestore.Entry{
		Status:  rec.status,
		Header:  rec.header,
		Body:    bytes.Clone(rec.buf.Bytes()),
		Stored:  now,
		Expires: now.Add(rec.ttl),
	}
	if len(rec.varyNames) > 0 {
		store.Set(base, &cachestore.Entry{VaryNames: rec.varyNames, Stored: now, Expires: now.Add(rec.ttl)})
		store.Set(variantKey(base, rec.varyNames, r), entry)
	} else {
		store.Set(base, entry)
	}
	return nil
}

// bypass says why a request is not served from (nor stored in) the cache,
// or "".
func (p *ProxyCache) bypass(r *http.Request) string {
	if !slices.Contains(p.Methods, r.Method) {
		return "method"
	}
	if r.Header.Get("Range") != "" {
		return "range"
	}
	if p.HonorCacheControl {
		cc := parseCacheControl(r.Header.Values("Cache-Control"))
		if _, ok := cc["no-cache"]; ok {
			return "no-cache"
		}
		if _, ok := cc["no-store"]; ok {
			return "no-store"
		}
		if len(r.Header.Values("Cache-Control")) == 0 && strings.Contains(strings.ToLower(r.Header.Get("Pragma")), "no-cache") {
			return "no-cache"
		}
	}
	// A cookie is the usual session of an upstream's own sign-in: the
	// response may be personal, and the gateway cannot tell.
	if !p.CacheCookieRequests && len(r.Header.Values("Cookie")) > 0 {
		return "cookie"
	}
	// A response to a request authorized by the upstream itself may be
	// personal: only cache it when the gateway authenticated the consumer
	// (who is then part of the key).
	if r.Header.Get("Authorization") != "" {
		if info := gwctx.From(r); info == nil || info.Consumer == nil {
			return "authorization"
		}
	}
	return ""
}

// tooOld applies a request's Cache-Control max-age to a cached entry.
func tooOld(r *http.Request, e *cachestore.Entry) bool {
	cc := parseCacheControl(r.Header.Values("Cache-Control"))
	v, ok := cc["max-age"]
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	return time.Since(e.Stored) > time.Duration(n)*time.Second
}

// baseKey is the cache key of a request before response variants: plugin
// instance, the gateway route and service that serve it, method, scheme,
// host, path (as encoded), query, the vary_headers values and the authenticated consumer
// (a per-consumer response is never served to another consumer).
//
// The route and service are part of it because one instance (global or
// service scope) serves several routes, and the path here is the one the
// upstream gets: with strip_path, /a/x of one route and /b/x of another are
// both /x, and routes that differ only in header conditions, or a route's
// splits, send the same URL to different upstreams. The scheme is part of it as it is of the effective
// request URI: an HTTPS response (with the hsts plugin's
// Strict-Transport-Security, or an upstream's answer to
// X-Forwarded-Proto: https) is never served to a plain-HTTP request.
func (p *ProxyCache) baseKey(r *http.Request) string {
	h := sha256.New()
	write := func(s string) {
		io.WriteString(h, strconv.Itoa(len(s)))
		io.WriteString(h, ":")
		io.WriteString(h, s)
	}
	if info := gwctx.From(r); info != nil && info.Matched {
		write("route:" + strconv.FormatInt(info.RouteID, 10) + "/service:" + strconv.FormatInt(info.ServiceID, 10))
	}
	write(r.Method)
	if r.TLS != nil {
		write("https")
	} else {
		write("http")
	}
	write(strings.ToLower(r.Host))
	// The path as the upstream gets it (the client's encoding, which the
	// router keeps): /a%2Fb and /a/b are different requests to most
	// upstreams, and the decoded path would let one's answer be served
	// for the other.
	write(r.URL.EscapedPath())
	write(r.URL.RawQuery)
	for _, name := range p.vary {
		write(name)
		write(strings.Join(r.Header.Values(name), ","))
	}
	if info := gwctx.From(r); info != nil && info.Consumer != nil {
		write("consumer:" + strconv.FormatInt(info.Consumer.ID, 10))
	}
	return p.prefix + string(h.Sum(nil))
}

// variantKey extends a base key with the values of the headers a response
// varies on.
func variantKey(base string, names []string, r *http.Request) string {
	h := sha256.New()
	io.WriteString(h, base)
	for _, n := range names {
		v := strings.Join(r.Header.Values(n), ",")
		io.WriteString(h, "\x00"+n+"\x00"+strconv.Itoa(len(v))+":"+v)
	}
	return base + "/v:" + string(h.Sum(nil))
}

// serveEntry answers from the cache.
func serveEntry(w http.ResponseWriter, r *http.Request, e *cachestore.Entry) {
	h := w.Header()
	for k, vs := range e.Header {
		h[k] = slices.Clone(vs)
	}
	age := int64(time.Since(e.Stored) / time.Second)
	h.Set("Age", strconv.FormatInt(age, 10))
	h.Set(Header, "Hit")
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead && len(e.Body) > 0 {
		_, _ = w.Write(e.Body)
	}
}

// storableHeaders are the headers of a response worth replaying: those the
// inner handlers (the upstream) set, without hop-by-hop ones.
func storableHeaders(before, after http.Header) http.Header {
	out := http.Header{}
	for k, vs := range after {
		if hopByHop[k] || k == Header || k == "Age" {
			continue
		}
		if old, ok := before[k]; ok && slices.Equal(old, vs) {
			continue // set by an outer handler for this request
		}
		out[k] = slices.Clone(vs)
	}
	return out
}

var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// recorder passes the response through while keeping a copy of a storable
// one.
type recorder struct {
	*caddyhttp.ResponseWriterWrapper
	p    *ProxyCache
	info *gwctx.Info
	// consumer is the one authenticated before the cache ran (in the key).
	consumer *consumers.Consumer
	before   http.Header
	limit    int64 // the most body bytes kept

	wroteHeader bool
	status      int
	storable    bool
	ttl         time.Duration
	header      http.Header
	varyNames   []string
	buf         bytes.Buffer
	overflow    bool
}

func (rec *recorder) WriteHeader(status int) {
	if rec.wroteHeader {
		return
	}
	if status >= 100 && status < 200 && status != http.StatusSwitchingProtocols {
		rec.ResponseWriter.WriteHeader(status) // informational: not the response
		return
	}
	rec.wroteHeader = true
	rec.status = status
	h := rec.ResponseWriter.Header()
	rec.storable, rec.ttl, rec.varyNames = rec.p.storable(status, h, rec.limit)
	rec.storable = rec.storable && !rec.info.Uncacheable // filled in with this request's values
	// A consumer authenticated after the cache (a Caddyfile route
	// running an auth plugin inside it) is not in the key: the response
	// would be served to anyone.
	rec.storable = rec.storable && rec.info.Consumer == rec.consumer
	if rec.storable {
		rec.header = storableHeaders(rec.before, h)
	} else {
		h.Set(Header, "Bypass")
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	if rec.storable && !rec.overflow {
		if int64(rec.buf.Len()+len(b)) > rec.limit {
			rec.overflow = true
			rec.buf = bytes.Buffer{}
		} else {
			rec.buf.Write(b)
		}
	}
	return rec.ResponseWriter.Write(b)
}

// ReadFrom keeps io.Copy going through Write (the embedded wrapper's
// ReadFrom would bypass the recording).
func (rec *recorder) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{rec}, r)
}

type writerOnly struct{ io.Writer }

// storable decides whether a response whose body may be up to limit bytes
// may be stored, for how long, and the request headers it varies on.
func (p *ProxyCache) storable(status int, h http.Header, limit int64) (bool, time.Duration, []string) {
	if !slices.Contains(p.StatusCodes, status) {
		return false, 0, nil
	}
	if len(p.ctypes) > 0 && !matchType(p.ctypes, mediaType(h.Get("Content-Type"))) {
		return false, 0, nil
	}
	if cl := h.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n > limit {
			return false, 0, nil
		}
	}
	if len(h.Values("Set-Cookie")) > 0 {
		return false, 0, nil // personal
	}
	var vary []string
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			// Vary: Cookie says the response is per session: keyed by
			// the cookie it would fill the cache with one entry per
			// client, served to nobody else.
			if f == "*" || strings.EqualFold(f, "Cookie") {
				return false, 0, nil
			}
			if f != "" {
				vary = append(vary, http.CanonicalHeaderKey(f))
			}
		}
	}
	slices.Sort(vary)
	vary = slices.Compact(vary)
	vary = slices.DeleteFunc(vary, func(n string) bool { return slices.Contains(p.vary, n) }) // already in the key
	ttl := time.Duration(p.TTLS) * time.Second
	if p.HonorCacheControl {
		cc := parseCacheControl(h.Values("Cache-Control"))
		for _, d := range []string{"no-store", "private", "no-cache"} {
			if _, ok := cc[d]; ok {
				return false, 0, nil
			}
		}
		age, ok := cc["s-maxage"]
		if !ok {
			age, ok = cc["max-age"]
		}
		if ok {
			n, err := strconv.ParseInt(age, 10, 64)
			if err != nil || n <= 0 {
				return false, 0, nil
			}
			ttl = time.Duration(n) * time.Second
		} else if exp := h.Get("Expires"); exp != "" {
			t, err := http.ParseTime(exp)
			if err != nil || !t.After(time.Now()) {
				return false, 0, nil
			}
			ttl = time.Until(t)
		}
	}
	return true, ttl, vary
}

// parseCacheControl parses Cache-Control directives (lower-cased names,
// unquoted values).
func parseCacheControl(values []string) map[string]string {
	out := map[string]string{}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(part), "=")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "" {
				out[name] = strings.Trim(strings.TrimSpace(val), `"`)
			}
		}
	}
	return out
}

// mediaType is the lower-cased type/subtype of a Content-Type value.
func mediaType(ct string) string {
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

func matchType(list []string, mt string) bool {
	for _, t := range list {
		if t == mt {
			return true
		}
		if prefix, ok := strings.CutSuffix(t, "/*"); ok && strings.HasPrefix(mt, prefix+"/") {
			return true
		}
	}
	return false
}

// isToken reports whether s is an HTTP token (RFC 9110), the syntax of
// methods, media type parts and header names alike.
func isToken(s string) bool { return httpguts.ValidHeaderFieldName(s) }

// SetDefaults implements schema.Defaulter.
func (p *ProxyCache) SetDefaults() {
	p.TTLS = 300
	p.Methods = []string{"GET", "HEAD"}
	p.StatusCodes = []int{200, 301, 404}
	p.ContentTypes = []string{}
	p.MaxBodyBytes = 1048576
	p.VaryHeaders = []string{}
	p.HonorCacheControl = true
	p.CacheCookieRequests = false
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler with the plugins'
// shared syntax (plugins.UnmarshalCaddyfile):
//
//	gateway_proxy_cache [<ttl_s>] {
//	    ttl_s <seconds>
//	    methods <method...>
//	    status_codes <code...>
//	    content_types <type/subtype...>
//	    max_body_bytes <n>
//	    vary_headers <header...>
//	    honor_cache_control [true|false]
//	    cache_cookie_requests [true|false]
//	}
func (p *ProxyCache) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugins.UnmarshalCaddyfile(d, p, plugins.Syntax{Args: []string{"ttl_s"}})
}

// AnswersFromStore implements plugins.Cache: the router runs the cache
// after the access plugins of its chain (plugins.Arrange).
func (*ProxyCache) AnswersFromStore() {}

// Interface guards
var (
	_ plugins.Plugin      = (*ProxyCache)(nil)
	_ plugins.Cache       = (*ProxyCache)(nil)
	_ caddy.CleanerUpper  = (*ProxyCache)(nil)
	_ http.ResponseWriter = (*recorder)(nil)
	_ io.ReaderFrom       = (*recorder)(nil)
)
