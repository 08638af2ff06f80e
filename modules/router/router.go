// Package router is the gateway's HTTP router: the gateway_router handler
// carries the compiled routing table (routes, one reverse proxy per service,
// plugin instances and the consumer table), matches each request by the
// rules of docs/routing.md (table.go) and runs the route's plugin chain in front
// of the service's proxy. The admin API's /api/v1/router/test runs the same
// Table.
package router

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"golang.org/x/net/http/httpguts"

	"github.com/caddy-gateway/gateway/internal/configref"
	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/modpool"
	"github.com/caddy-gateway/gateway/internal/records"
	_ "github.com/caddy-gateway/gateway/modules/gwproxy" // ProxyModule
	"github.com/caddy-gateway/gateway/modules/plugins"
)

func init() {
	caddy.RegisterModule(Router{})
}

// ServiceProxies are the reverse_proxy handler configs of services by
// service id, without the "handler" module key (Router.ServicesRef),
// provisioned in the config's own context.
type ServiceProxies map[int64]json.RawMessage

// ProxyModule is the handler module of the service proxies: the gateway's
// own proxy, which takes reverse_proxy's configuration (package gwproxy
// says why it replaces reverse_proxy on the hot path).
const ProxyModule = "http.handlers.gateway_proxy"

// PooledProxies are service proxies a modpool.Pool provisions once and
// shares between configs (Router.ServicesRef): a change leaves the
// proxies of unchanged services, their connection pools, passive health
// and streams, as they are, and costs only the changed services'
// provisioning.
type PooledProxies struct {
	// Module is the proxies' handler module id (default ProxyModule).
	Module string
	// Proxies are the handler configs by service id; a service's proxy
	// is shared while its bytes stay the same.
	Proxies ServiceProxies
	Pool    *modpool.Pool
}

// Router is the gateway_router HTTP handler.
type Router struct {
	// Routes are the enabled routes.
	Routes []Route `json:"routes,omitempty"`
	// RoutesRef references the gateway's compiled routing table instead of
	// Routes: a *Table (the gateway keeps its table and updates it from
	// the changed rows on every change, see Table.With) or a []Route, in
	// package configref. A routing table of tens of thousands of routes is
	// not encoded into Caddy's JSON config, decoded and re-encoded by
	// Caddy, and built again, on every change.
	RoutesRef string `json:"routes_ref,omitempty"`
	// Services maps a service id to the handler that proxies to it (a
	// reverse_proxy provisioned from the service and its targets).
	ServicesRaw map[string]json.RawMessage `json:"services,omitempty" caddy:"namespace=http.handlers inline_key=handler"`
	// ServicesRef references the service proxies instead of Services: a
	// ServiceProxies or a *PooledProxies in package configref. With thousands of services
	// their handler configs were most of Caddy's JSON config, which Caddy
	// decodes and encodes again several times on every load.
	ServicesRef string `json:"services_ref,omitempty"`
	// Plugins maps a plugin instance id to its handler module.
	PluginsRaw map[string]json.RawMessage `json:"plugins,omitempty" caddy:"namespace=http.handlers inline_key=handler"`
	// PluginsRef references the plugin handler modules instead of
	// Plugins: a PluginConfigs in package configref. Plugin configs carry
	// secrets (an http-log plugin's endpoint credentials and headers, a
	// wasm plugin's configuration), which Caddy's JSON config must not
	// hold, and can be bulk (ip-restriction lists).
	PluginsRef string `json:"plugins_ref,omitempty"`
	// Chains are the plugin chains of routes that do not list their own
	// (Route.Plugins): by route, else by the route's service, else the
	// default chain.
	Chains *Chains `json:"chains,omitempty"`
	// Consumers is the consumer and credential table the auth plugins use,
	// for hand-written configs. The gateway never writes it: credentials are
	// secrets, so it hands its table by reference (ConsumersRef).
	Consumers []consumers.Consumer `json:"consumers,omitempty"`
	// ConsumersRef references the gateway's compiled consumer table
	// (a *consumers.Table in package configref); it replaces Consumers.
	ConsumersRef string `json:"consumers_ref,omitempty"`
	// TrustedProxies are the peers (IPs or CIDRs) whose X-Forwarded-For
	// decides the client IP.
	TrustedProxies []string `json:"trusted_proxies,omitempty"`
	// HTTPSPort is the port of the gateway's HTTPS listener (redirects).
	HTTPSPort int `json:"https_port,omitempty"`

	table     *Table
	services  map[int64]caddyhttp.MiddlewareHandler
	leases    []*modpool.Lease // pooled proxies, released in Cleanup
	consumers *consumers.Table
	trusted   []netip.Prefix
	// The composed chains: routeChains by route id, serviceChains by
	// service id, defaultChain for the rest (the proxy alone when no plugin
	// applies).
	routeChains   map[int64]*chain
	serviceChains map[int64]*chain
	defaultChain  *chain
}

// Chains lists the plugin instance ids, in the order they run, of the
// routes' plugin chains. The gateway compiles one chain per service and
// one per route with route-scoped plugins, so that a plugin change touches
// this small list and not the routing table.
type Chains struct {
	// Default is the chain of routes without a route or service chain.
	Default []int64 `json:"default,omitempty"`
	// Services are the chains of the routes of a service (by service_id).
	Services map[int64][]int64 `json:"services,omitempty"`
	// Routes are the chains of single routes.
	Routes map[int64][]int64 `json:"routes,omitempty"`
}

// chain is a composed plugin chain ending in the proxy.
type chain struct {
	handler caddyhttp.Handler
	// sinks of the chain's record sinks (http-log): registered before the
	// chain runs, so requests that an earlier plugin answers (401, 429, a
	// cache hit) are logged too.
	sinks []records.Sink
}

// CaddyModule returns the Caddy module information.
func (Router) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_router",
		New: func() caddy.Module { return new(Router) },
	}
}

// Provision takes or builds the match index, provisions the service
// proxies and the plugin instances, and composes each plugin chain once.
func (rt *Router) Provision(ctx caddy.Context) error {
	if err := rt.provisionTable(); err != nil {
		return err
	}
	var err error
	if rt.services, err = rt.loadByID(ctx, "ServicesRaw", len(rt.ServicesRaw), "service proxies"); err != nil {
		return err
	}
	if rt.ServicesRef != "" {
		if err := rt.provisionServices(ctx); err != nil {
			return err
		}
	}
	handlers, err := rt.loadByID(ctx, "PluginsRaw", len(rt.PluginsRaw), "plugins")
	if err != nil {
		return err
	}
	if rt.PluginsRef != "" {
		if err := loadPlugins(ctx, rt.PluginsRef, handlers); err != nil {
			return err
		}
	}
	rt.consumers = consumers.NewTable(rt.Consumers)
	if rt.ConsumersRef != "" {
		tbl, err := configref.Get[*consumers.Table](rt.ConsumersRef)
		if err != nil {
			return fmt.Errorf("consumers_ref: %w", err)
		}
		rt.consumers = tbl
	}
	for _, p := range rt.TrustedProxies {
		prefix, err := parsePrefix(p)
		if err != nil {
			return fmt.Errorf("trusted proxy %q: %w", p, err)
		}
		rt.trusted = append(rt.trusted, prefix)
	}
	return rt.composeChains(handlers)
}

// loadByID loads the handler modules of rt's field (ServicesRaw or
// PluginsRaw: n module configs keyed by id) into a map by id; what names
// them in errors.
func (rt *Router) loadByID(ctx caddy.Context, field string, n int, what string) (map[int64]caddyhttp.MiddlewareHandler, error) {
	out := make(map[int64]caddyhttp.MiddlewareHandler, n)
	if n == 0 {
		return out, nil
	}
	mods, err := ctx.LoadModule(rt, field)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", what, err)
	}
	for key, m := range mods.(map[string]any) {
		id, err := strconv.ParseInt(key, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: key %q is not an id", what, key)
		}
		out[id] = m.(caddyhttp.MiddlewareHandler)
	}
	return out, nil
}

// PluginConfigs are plugin handler modules by instance id: what
// PluginsRef references.
type PluginConfigs map[int64]PluginConfig

// PluginConfig is one plugin handler module: its name in http.handlers
// and its config.
type PluginConfig struct {
	Module string          `json:"module"`
	Config json.RawMessage `json:"config"`
}

// loadPlugins loads the handler modules of the PluginConfigs ref names
// into out.
func loadPlugins(ctx caddy.Context, ref string, out map[int64]caddyhttp.MiddlewareHandler) error {
	configs, err := configref.Get[PluginConfigs](ref)
	if err != nil {
		return fmt.Errorf("plugins_ref: %w", err)
	}
	for id, pc := range configs {
		m, err := ctx.LoadModuleByID("http.handlers."+pc.Module, pc.Config)
		if err != nil {
			return fmt.Errorf("loading plugin %d: %w", id, err)
		}
		h, ok := m.(caddyhttp.MiddlewareHandler)
		if !ok {
			return fmt.Errorf("loading plugin %d: %s is %T, not an HTTP handler", id, pc.Module, m)
		}
		out[id] = h
	}
	return nil
}

// provisionServices provisions the referenced service proxies: in the
// config's context (Caddy cleans them up with the config), or leased from
// a pool (released in Cleanup).
func (rt *Router) provisionServices(ctx caddy.Context) error {
	v, ok := configref.Lookup(rt.ServicesRef)
	if !ok {
		_, err := configref.Get[ServiceProxies](rt.ServicesRef)
		return fmt.Errorf("services_ref: %w", err)
	}
	switch v := v.(type) {
	case ServiceProxies:
		for id, raw := range v {
			m, err := ctx.LoadModuleByID(ProxyModule, raw)
			if err != nil {
				return fmt.Errorf("loading the proxy of service %d: %w", id, err)
			}
			rt.services[id] = m.(caddyhttp.MiddlewareHandler)
		}
	case *PooledProxies:
		module := v.Module
		if module == "" {
			module = ProxyModule
		}
		rt.leases = make([]*modpool.Lease, 0, len(v.Proxies))
		for id, raw := range v.Proxies {
			l, err := v.Pool.Acquire("service/"+strconv.FormatInt(id, 10), module, raw)
			if err != nil {
				return fmt.Errorf("loading the proxy of service %d: %w", id, err)
			}
			rt.leases = append(rt.leases, l)
			h, ok := l.Module().(caddyhttp.MiddlewareHandler)
			if !ok {
				return fmt.Errorf("the proxy of service %d is %T, not an HTTP handler", id, l.Module())
			}
			rt.services[id] = h
		}
	default:
		return fmt.Errorf("services_ref: reference %q holds %T, want a router.ServiceProxies or *router.PooledProxies", rt.ServicesRef, v)
	}
	return nil
}

// Cleanup releases the pooled proxies this config used: the pool cleans
// up those no other config uses.
func (rt *Router) Cleanup() error {
	for _, l := range rt.leases {
		l.Release()
	}
	rt.leases = nil
	return nil
}

// provisionTable takes the referenced table, or builds one from the
// routes.
func (rt *Router) provisionTable() error {
	if rt.RoutesRef != "" {
		v, ok := configref.Lookup(rt.RoutesRef)
		if !ok {
			_, err := configref.Get[*Table](rt.RoutesRef)
			return fmt.Errorf("routes_ref: %w", err)
		}
		switch v := v.(type) {
		case *Table:
			rt.table = v
			return nil
		case []Route:
			rt.Routes = v
		default:
			return fmt.Errorf("routes_ref: reference %q holds %T, want a *router.Table or []router.Route", rt.RoutesRef, v)
		}
	}
	table, err := NewTable(rt.Routes)
	if err != nil {
		return fmt.Errorf("building route table: %w", err)
	}
	rt.table = table
	return nil
}

// composeChains composes the chains of Chains and of the routes that list
// their own plugins, in the order plugins.Arrange gives (a cache never
// answers before the chain's access plugins, whatever the orderings).
// Identical plugin lists share one composed chain.
func (rt *Router) composeChains(handlers map[int64]caddyhttp.MiddlewareHandler) error {
	terminal := caddyhttp.HandlerFunc(rt.proxy)
	composed := map[string]*chain{}
	compile := func(ids []int64) (*chain, error) {
		key := fmt.Sprint(ids)
		if c, ok := composed[key]; ok {
			return c, nil
		}
		mws := make([]caddyhttp.MiddlewareHandler, 0, len(ids))
		c := new(chain)
		for _, id := range ids {
			p, ok := handlers[id]
			if !ok {
				return nil, fmt.Errorf("plugin %d is not configured", id)
			}
			mws = append(mws, p)
			if rs, ok := p.(recordSinker); ok {
				if sink := rs.RecordSink(); sink != nil {
					c.sinks = append(c.sinks, sink)
				}
			}
		}
		mws = plugins.Arrange(mws)
		names := make([]string, len(mws))
		for i, p := range mws {
			names[i] = pluginType(p)
		}
		c.handler = compose(mws, names, terminal)
		composed[key] = c
		return c, nil
	}
	var err error
	if rt.defaultChain, err = compile(nil); err != nil {
		return err
	}
	rt.routeChains = map[int64]*chain{}
	rt.serviceChains = map[int64]*chain{}
	if c := rt.Chains; c != nil {
		if rt.defaultChain, err = compile(c.Default); err != nil {
			return fmt.Errorf("default chain: %w", err)
		}
		for id, ids := range c.Services {
			if rt.serviceChains[id], err = compile(ids); err != nil {
				return fmt.Errorf("chain of service %d: %w", id, err)
			}
		}
		for id, ids := range c.Routes {
			if rt.routeChains[id], err = compile(ids); err != nil {
				return fmt.Errorf("chain of route %d: %w", id, err)
			}
		}
	}
	// Routes of a hand-written config list their own chains.
	for i := range rt.Routes {
		r := &rt.Routes[i]
		if r.Plugins == nil {
			continue
		}
		if rt.routeChains[r.ID], err = compile(r.Plugins); err != nil {
			return fmt.Errorf("route %d: %w", r.ID, err)
		}
	}
	return nil
}

// chainOf is the plugin chain of a matched route.
func (rt *Router) chainOf(r *Route) *chain {
	if len(rt.routeChains) > 0 {
		if c, ok := rt.routeChains[r.ID]; ok {
			return c
		}
	}
	if c, ok := rt.serviceChains[r.ServiceID]; ok {
		return c
	}
	return rt.defaultChain
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// recordSinker is a plugin that wants the request record of every request
// through its route, whether or not the chain reaches it.
type recordSinker interface{ RecordSink() records.Sink }

// compose wraps terminal in the middlewares, first one outermost. Each
// notes its plugin type (names) in the request's Info.AnsweredBy as it
// starts.
func compose(mws []caddyhttp.MiddlewareHandler, names []string, terminal caddyhttp.Handler) caddyhttp.Handler {
	h := terminal
	for i := len(mws) - 1; i >= 0; i-- {
		mw, next, name := mws[i], h, names[i]
		h = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			if info := gwctx.From(r); info != nil {
				info.AnsweredBy = name
			}
			return mw.ServeHTTP(w, r, next)
		})
	}
	return h
}

// pluginType is the plugin type of a plugin handler module
// (http.handlers.gateway_key_auth: key-auth), for Info.AnsweredBy.
func pluginType(h caddyhttp.MiddlewareHandler) string {
	m, ok := h.(caddy.Module)
	if !ok {
		return fmt.Sprintf("%T", h)
	}
	name := m.CaddyModule().ID.Name()
	if t, ok := strings.CutPrefix(name, "gateway_"); ok {
		return strings.ReplaceAll(t, "_", "-")
	}
	return name
}

// Validate checks that every service a route references has a proxy.
func (rt *Router) Validate() error {
	for _, id := range rt.table.Services() {
		if _, ok := rt.services[id]; !ok {
			return fmt.Errorf("service %d, referenced by a route, has no proxy", id)
		}
	}
	return nil
}

// forwardedHeaders are the X-Forwarded-* headers the service proxy sets.
var forwardedHeaders = [...]string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"}

// forwardingHeaders are the other headers a proxy in front says the client
// or the original request with (beside X-Forwarded-For, -Proto and -Host,
// which the service proxy sets): from a client that is no trusted proxy
// they are forgeries that upstreams may believe (X-Real-IP as the client
// address), so they are removed, as Traefik does.
var forwardingHeaders = map[string]bool{
	"Forwarded": true, "X-Real-Ip": true, "X-Forwarded-Port": true, "X-Forwarded-Prefix": true,
	"X-Forwarded-Server": true, "X-Forwarded-Uri": true, "X-Forwarded-Method": true, "X-Forwarded-Ssl": true,
	"X-Forwarded-Tls-Client-Cert": true, "X-Forwarded-Tls-Client-Cert-Info": true,
	// the client address as CDNs say it, and the path overrides some
	// frameworks obey (Symfony, IIS): a request for /public saying
	// X-Original-URL: /admin
	"True-Client-Ip": true, "X-Client-Ip": true, "X-Original-Url": true, "X-Rewrite-Url": true,
}

// The '_' spellings the router removes (consumers.DeleteLookalikes): the
// X-Forwarded-* the proxy sets from anyone, forwardingHeaders' too from a
// client that is no trusted proxy.
var (
	trustedLookalikes   = forwardedHeaders[:]
	untrustedLookalikes = append(forwardedHeaders[:], slices.Sorted(maps.Keys(forwardingHeaders))...)
)

// forwardingFirst holds the first bytes of forwardingHeaders' names, so
// that dropForwarding looks up only the names that could be one.
var forwardingFirst = func() (first [256]bool) {
	for k := range forwardingHeaders {
		first[k[0]] = true
	}
	return first
}()

// dropForwarding removes forwardingHeaders sent by a client that is no
// trusted proxy (their '_' spellings go with untrustedLookalikes).
func dropForwarding(h http.Header) {
	for k := range h {
		if k != "" && forwardingFirst[k[0]] && forwardingHeaders[k] {
			delete(h, k)
		}
	}
}

// dropClientHopHeaders removes the headers the client's Connection header
// names (its hop-by-hop headers) now, before any plugin runs, and leaves
// Connection with the upgrade token alone. The proxy removes whatever
// Connection names from the upstream request; naming X-Consumer-ID,
// X-Request-ID or a request-transform header there would otherwise remove
// the gateway's own (the class of Traefik's CVE-2024-45410).
func dropClientHopHeaders(h http.Header) {
	conn, ok := h["Connection"]
	if !ok {
		return
	}
	upgrade := false
	for _, v := range conn {
		for f := range strings.SplitSeq(v, ",") {
			switch f = textproto.TrimString(f); {
			case strings.EqualFold(f, "upgrade"):
				upgrade = true
			case f != "":
				delete(h, textproto.CanonicalMIMEHeaderKey(f))
			}
		}
	}
	if upgrade {
		h["Connection"] = []string{"Upgrade"}
	} else {
		delete(h, "Connection")
	}
}

// UpstreamHostHeader is the Host header value the config compiler gives each
// service proxy.
const UpstreamHostHeader = "{" + gwctx.UpstreamHostKey + "}"

// ServeHTTP routes the request. Unmatched traffic gets 404 {"error": "no
// route matched"}; next is never called (the router is the end of a route).
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	info, r := gwctx.Ensure(r)
	clientIP, trusted := rt.clientIP(r)
	info.ClientIP = clientIP
	// Caddy's own view of the client follows the gateway's trusted_proxies:
	// {client_ip} placeholders, and reverse_proxy keeping a trusted peer's
	// X-Forwarded-* chain instead of replacing it.
	// (Caddy set both already; storing the same string again would
	// allocate.)
	if ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ip != clientIP {
		caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, clientIP)
	}
	caddyhttp.SetVar(r.Context(), caddyhttp.TrustedProxyVarKey, trusted)
	info.Consumers = rt.consumers
	info.HTTPSPort = rt.HTTPSPort
	consumers.StripHeaders(r.Header)
	// The proxy sets X-Forwarded-* (an untrusted client's replaced, a
	// trusted proxy's extended), but their '_' spellings would pass
	// through, and CGI-style upstreams read them as the same
	// (HTTP_X_FORWARDED_FOR). No proxy adds those: whoever sent one,
	// through a trusted proxy or not, is a client.
	if trusted {
		consumers.DeleteLookalikes(r.Header, trustedLookalikes)
	} else {
		consumers.DeleteLookalikes(r.Header, untrustedLookalikes)
		dropForwarding(r.Header)
	}
	dropClientHopHeaders(r.Header)
	guard.DropAdminCookies(r.Header)

	// Match, authorize and forward the path without dot segments or runs of
	// slashes, so that /public/../private is never a /public request, nor
	// //private a request of a catch-all route.
	path, m, err := rt.table.Resolve(Request{Host: r.Host, Path: r.URL.Path, Method: r.Method, Header: r.Header})
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrPathTooLong) {
			status = http.StatusRequestURITooLong
		}
		info.Status = status
		what := "invalid request path: "
		if errors.Is(err, ErrMethodOverride) {
			what = "invalid request: "
		}
		gwctx.WriteError(w, status, what+err.Error())
		return nil
	}
	if path != r.URL.Path {
		r.URL.Path, r.URL.RawPath = path, ""
	}
	if m.Route == nil {
		info.Status = http.StatusNotFound
		gwctx.WriteError(w, http.StatusNotFound, "no route matched")
		return nil
	}
	route := m.Route
	ch := rt.chainOf(route)
	info.Matched = true
	info.RouteID = route.ID
	info.RouteName = route.Name
	info.MatchedPath = m.MatchedPath
	info.ServiceID = m.e.pickService()
	info.Sinks = append(info.Sinks, ch.sinks...)
	if r.Method == http.MethodConnect && !connectAllowed(route, r) {
		info.Status = http.StatusMethodNotAllowed
		w.Header().Set("Allow", allowedMethods)
		gwctx.WriteError(w, http.StatusMethodNotAllowed, "CONNECT is not allowed on this route (a route proxies it only when its methods list CONNECT)")
		return nil
	}

	if route.StripPath {
		up, err := ForwardPath(route, m.MatchedPath, r.URL.Path)
		if err != nil { // a backslash dot segment only the stripping exposed
			info.Status = http.StatusBadRequest
			gwctx.WriteError(w, http.StatusBadRequest, "invalid request path: "+err.Error())
			return nil
		}
		r.URL.Path, r.URL.RawPath = up, ""
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		origHost := r.Host
		preserve := route.PreserveHost
		repl.Map(func(key string) (any, bool) {
			if key != gwctx.UpstreamHostKey {
				return nil, false
			}
			if preserve {
				return origHost, true
			}
			return repl.Get("http.reverse_proxy.upstream.hostport")
		})
	}
	// The chain's response header hooks (gwctx.RecordingWriter.OnHeader)
	// apply to what is written inside it, not to the error answer the
	// gateway writes once it has returned: as if they wrapped w.
	rw, _ := w.(*gwctx.RecordingWriter)
	n := rw.Hooks()
	err = ch.handler.ServeHTTP(w, r)
	rw.DropHooks(n)
	return err
}

// allowedMethods is the Allow header of a CONNECT refused by a route that
// takes any method.
const allowedMethods = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE"

// connectAllowed reports whether route proxies the CONNECT request r. A
// tunnel request sent to a plain HTTP upstream (which the gateway's
// proxies then relay byte for byte) is never what a route that takes
// "any method" means: only a route whose methods list CONNECT proxies
// it. Extended CONNECT for WebSocket over HTTP/2 and HTTP/3 (RFC 8441,
// 9220) is no tunnel: Caddy's proxy sends it upstream as an HTTP/1.1
// upgrade, as any WebSocket request.
func connectAllowed(route *Route, r *http.Request) bool {
	if (r.ProtoMajor == 2 && r.Header.Get(":protocol") == "websocket") || (r.ProtoMajor == 3 && r.Proto == "websocket") {
		return true
	}
	return slices.ContainsFunc(route.Methods, func(m string) bool { return strings.EqualFold(m, http.MethodConnect) })
}

// pickService is the route's service, or a weighted random pick of its splits.
func (e *entry) pickService() int64 {
	if e.x == nil || e.x.total == 0 {
		return e.route.ServiceID
	}
	n := rand.Int64N(e.x.total)
	i := sort.Search(len(e.x.splits), func(i int) bool { return e.x.splits[i] > n })
	return e.route.Splits[i].ServiceID
}

// proxy is the end of every chain: the picked service's reverse proxy.
func (rt *Router) proxy(w http.ResponseWriter, r *http.Request) error {
	info := gwctx.From(r)
	info.AnsweredBy = "" // no plugin answered
	p, ok := rt.services[info.ServiceID]
	if !ok {
		return caddyhttp.Error(http.StatusServiceUnavailable, fmt.Errorf("service %d has no proxy", info.ServiceID))
	}
	// A request the gateway itself made unsendable (a placeholder that
	// expanded a client's %0d%0a into a header value) would fail in the
	// transport, and Caddy's passive health would count that against the
	// target: a client could take targets out of rotation. It is the
	// client's 400 instead, and the target never sees it.
	if msg := unsendable(r); msg != "" {
		info.Status = http.StatusBadRequest
		gwctx.WriteError(w, http.StatusBadRequest, msg)
		return nil
	}
	return p.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil }))
}

// unsendable says why r cannot go upstream as it is ("" when it can): a
// header name or value, or the Host, that net/http's transport refuses.
func unsendable(r *http.Request) string {
	for name, values := range r.Header {
		if !httpguts.ValidHeaderFieldName(name) {
			return fmt.Sprintf("the request cannot be forwarded: invalid header name %q", name)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				return "the request cannot be forwarded: header " + name + " has an invalid value"
			}
		}
	}
	if !httpguts.ValidHostHeader(r.Host) {
		return "the request cannot be forwarded: invalid Host"
	}
	return ""
}

// PassiveDown reports whether the passive health checks of the
// service's proxy currently keep the target at addr out of rotation
// (failed proxied requests within the fail duration), so that the health
// the admin API reports agrees with where traffic goes.
func (rt *Router) PassiveDown(serviceID int64, addr string) (fails int, down bool) {
	switch h := rt.services[serviceID].(type) {
	case passiveHealth:
		return h.PassiveHealth(addr)
	case *reverseproxy.Handler:
		for _, u := range h.Upstreams {
			if u.Dial == addr && u.Host != nil {
				return u.Host.Fails(), !u.Healthy()
			}
		}
	}
	return 0, false
}

// passiveHealth is a service proxy that counts failed round trips per
// target (gwproxy.Handler).
type passiveHealth interface {
	PassiveHealth(addr string) (fails int, down bool)
}

// clientIP is the peer address, or, when the peer is a trusted proxy, the
// first untrusted address of X-Forwarded-For read from the right; trusted
// tells whether the peer is a trusted proxy.
func (rt *Router) clientIP(r *http.Request) (ip string, trusted bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(rt.trusted) == 0 {
		return host, false
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !rt.isTrusted(peer) {
		return host, false
	}
	xff := r.Header.Values("X-Forwarded-For")
	client := host
	for i := len(xff) - 1; i >= 0; i-- {
		parts := strings.Split(xff[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return client, true
			}
			client = a.String()
			if !rt.isTrusted(a) {
				return client, true
			}
		}
	}
	return client, true
}

func (rt *Router) isTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range rt.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ServiceProxy is the handler proxying to a service (nil: none).
func (rt *Router) ServiceProxy(serviceID int64) caddyhttp.MiddlewareHandler {
	return rt.services[serviceID]
}

// Table returns the compiled match table (for the admin dry run).
func (rt *Router) Table() *Table { return rt.table }

// ConsumerTable returns the consumers the auth plugins authenticate
// against (metrics name their counts by it).
func (rt *Router) ConsumerTable() *consumers.Table { return rt.consumers }

// PickService applies a route's splits the way traffic does.
func (rt *Router) PickService(routeID int64) int64 {
	if i, ok := rt.table.find(routeID); ok {
		return rt.table.entries[i].pickService()
	}
	return 0
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Router)(nil)
	_ caddy.CleanerUpper          = (*Router)(nil)
	_ caddy.Validator             = (*Router)(nil)
	_ caddyhttp.MiddlewareHandler = (*Router)(nil)
)
