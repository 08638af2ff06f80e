// Package router is the gateway's HTTP router: the gateway_router handler
// carries the compiled routing table (routes, one reverse proxy per service,
// plugin instances and the consumer table), matches each request by the
// rules of docs/routing.md (table.go) and runs the route's plugin chain in front
// of the service's proxy. The admin API's /api/v1/router/test runs the same
// Table.
package router

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"golang.org/x/net/http/httpguts"

	"github.com/caddy-gateway/gateway/modules/configref"
	"github.com/caddy-gateway/gateway/modules/consumers"
	"github.com/caddy-gateway/gateway/modules/gwctx"
	"github.com/caddy-gateway/gateway/modules/records"
)

func init() {
	caddy.RegisterModule(Router{})
}

// Router is the gateway_router HTTP handler.
type Router struct {
	// Routes are the enabled routes.
	Routes []Route `json:"routes,omitempty"`
	// RoutesRef references the gateway's compiled routes (a []Route in
	// package configref) instead of Routes: a routing table of tens of
	// thousands of routes is not encoded into Caddy's JSON config, decoded
	// and re-encoded by Caddy on every change.
	RoutesRef string `json:"routes_ref,omitempty"`
	// Services maps a service id to the handler that proxies to it (a
	// reverse_proxy provisioned from the service and its targets).
	ServicesRaw map[string]json.RawMessage `json:"services,omitempty" caddy:"namespace=http.handlers inline_key=handler"`
	// Plugins maps a plugin instance id to its handler module.
	PluginsRaw map[string]json.RawMessage `json:"plugins,omitempty" caddy:"namespace=http.handlers inline_key=handler"`
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
	routes    map[int64]*compiledRoute
	services  map[int64]caddyhttp.MiddlewareHandler
	consumers *consumers.Table
	trusted   []netip.Prefix
}

type compiledRoute struct {
	route *Route
	chain caddyhttp.Handler
	// sinks of the chain's record sinks (http-log): registered before the
	// chain runs, so requests that an earlier plugin answers (401, 429, a
	// cache hit) are logged too.
	sinks  []records.Sink
	splits []int64 // cumulative weights, aligned with route.Splits
	total  int64
}

// CaddyModule returns the Caddy module information.
func (Router) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_router",
		New: func() caddy.Module { return new(Router) },
	}
}

// Provision builds the match index, provisions the service proxies and the
// plugin instances, and composes each route's chain once.
func (rt *Router) Provision(ctx caddy.Context) error {
	if rt.RoutesRef != "" {
		routes, err := configref.Get[[]Route](rt.RoutesRef)
		if err != nil {
			return fmt.Errorf("routes_ref: %w", err)
		}
		rt.Routes = routes
	}
	table, err := NewTable(rt.Routes)
	if err != nil {
		return fmt.Errorf("building route table: %w", err)
	}
	rt.table = table

	rt.services = make(map[int64]caddyhttp.MiddlewareHandler, len(rt.ServicesRaw))
	if len(rt.ServicesRaw) > 0 {
		mods, err := ctx.LoadModule(rt, "ServicesRaw")
		if err != nil {
			return fmt.Errorf("loading service proxies: %w", err)
		}
		for id, m := range mods.(map[string]any) {
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				return fmt.Errorf("service key %q is not an id", id)
			}
			rt.services[n] = m.(caddyhttp.MiddlewareHandler)
		}
	}
	plugins := map[int64]caddyhttp.MiddlewareHandler{}
	if len(rt.PluginsRaw) > 0 {
		mods, err := ctx.LoadModule(rt, "PluginsRaw")
		if err != nil {
			return fmt.Errorf("loading plugins: %w", err)
		}
		for id, m := range mods.(map[string]any) {
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				return fmt.Errorf("plugin key %q is not an id", id)
			}
			plugins[n] = m.(caddyhttp.MiddlewareHandler)
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

	// Routes with the same plugin list share one composed chain.
	terminal := caddyhttp.HandlerFunc(rt.proxy)
	chains := map[string]caddyhttp.Handler{}
	rt.routes = make(map[int64]*compiledRoute, len(rt.Routes))
	for i := range rt.Routes {
		r := &rt.Routes[i]
		key := fmt.Sprint(r.Plugins)
		chain, ok := chains[key]
		if !ok {
			mws := make([]caddyhttp.MiddlewareHandler, 0, len(r.Plugins))
			for _, id := range r.Plugins {
				p, ok := plugins[id]
				if !ok {
					return fmt.Errorf("route %d: plugin %d is not configured", r.ID, id)
				}
				mws = append(mws, p)
			}
			chain = compose(mws, terminal)
			chains[key] = chain
		}
		cr := &compiledRoute{route: r, chain: chain}
		for _, id := range r.Plugins {
			if rs, ok := plugins[id].(recordSinker); ok {
				if sink := rs.RecordSink(); sink != nil {
					cr.sinks = append(cr.sinks, sink)
				}
			}
		}
		for _, s := range r.Splits {
			cr.total += int64(s.Weight)
			cr.splits = append(cr.splits, cr.total)
		}
		rt.routes[r.ID] = cr
	}
	return nil
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

// compose wraps terminal in the middlewares, first one outermost.
func compose(mws []caddyhttp.MiddlewareHandler, terminal caddyhttp.Handler) caddyhttp.Handler {
	h := terminal
	for i := len(mws) - 1; i >= 0; i-- {
		mw, next := mws[i], h
		h = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return mw.ServeHTTP(w, r, next)
		})
	}
	return h
}

// Validate checks the compiled config.
func (rt *Router) Validate() error {
	for _, r := range rt.Routes {
		ids := []int64{r.ServiceID}
		for _, s := range r.Splits {
			ids = append(ids, s.ServiceID)
		}
		for _, id := range ids {
			if _, ok := rt.services[id]; !ok {
				return fmt.Errorf("route %d: service %d has no proxy", r.ID, id)
			}
		}
	}
	return nil
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
	caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, clientIP)
	caddyhttp.SetVar(r.Context(), caddyhttp.TrustedProxyVarKey, trusted)
	info.Consumers = rt.consumers
	info.HTTPSPort = rt.HTTPSPort
	consumers.StripHeaders(r.Header)

	// Match, authorize and forward the path without dot segments, so that
	// /public/../private is never a /public request.
	path, err := NormalizePath(r.URL.Path)
	if err != nil {
		info.Status = http.StatusBadRequest
		gwctx.WriteError(w, http.StatusBadRequest, "invalid request path: "+err.Error())
		return nil
	}
	if path != r.URL.Path {
		r.URL.Path, r.URL.RawPath = path, ""
	}

	m := rt.table.Match(Request{Host: r.Host, Path: r.URL.Path, Method: r.Method, Header: r.Header})
	if m.Route == nil {
		info.Status = http.StatusNotFound
		gwctx.WriteError(w, http.StatusNotFound, "no route matched")
		return nil
	}
	cr := rt.routes[m.Route.ID]
	route := cr.route
	info.Matched = true
	info.RouteID = route.ID
	info.RouteName = route.Name
	info.MatchedPath = m.MatchedPath
	info.ServiceID = cr.pickService()
	info.Sinks = append(info.Sinks, cr.sinks...)

	if route.StripPath {
		up, err := NormalizePath(UpstreamPath(route, m.MatchedPath, r.URL.Path))
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
	return cr.chain.ServeHTTP(w, r)
}

// pickService is the route's service, or a weighted random pick of its splits.
func (cr *compiledRoute) pickService() int64 {
	if cr.total == 0 {
		return cr.route.ServiceID
	}
	n := rand.Int64N(cr.total)
	i := sort.Search(len(cr.splits), func(i int) bool { return cr.splits[i] > n })
	return cr.route.Splits[i].ServiceID
}

// proxy is the end of every chain: the picked service's reverse proxy.
func (rt *Router) proxy(w http.ResponseWriter, r *http.Request) error {
	info := gwctx.From(r)
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

// PassiveDown reports whether Caddy's passive health checks of the
// service's proxy currently keep the target at addr out of rotation
// (failed proxied requests within the fail duration), so that the health
// the admin API reports agrees with where traffic goes.
func (rt *Router) PassiveDown(serviceID int64, addr string) (fails int, down bool) {
	h, ok := rt.services[serviceID].(*reverseproxy.Handler)
	if !ok {
		return 0, false
	}
	for _, u := range h.Upstreams {
		if u.Dial == addr && u.Host != nil {
			return u.Host.Fails(), !u.Healthy()
		}
	}
	return 0, false
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

// Table returns the compiled match table (for the admin dry run).
func (rt *Router) Table() *Table { return rt.table }

// PickService applies a route's splits the way traffic does.
func (rt *Router) PickService(routeID int64) int64 {
	if cr := rt.routes[routeID]; cr != nil {
		return cr.pickService()
	}
	return 0
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Router)(nil)
	_ caddy.Validator             = (*Router)(nil)
	_ caddyhttp.MiddlewareHandler = (*Router)(nil)
)
