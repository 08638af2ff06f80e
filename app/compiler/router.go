package compiler

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strconv"

	"github.com/caddy-gateway/gateway/internal/configref"
	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/router"
	"github.com/caddy-gateway/gateway/storage"
)

// compileRouter is the gateway_router handler: the routing table, the
// consumer table, one reverse proxy per routed service and one handler per
// plugin instance some chain runs, all by reference, and the plugin chains.
func compileRouter(snap *storage.Snapshot, idx *snapIndex, opt Options, out *Compiled) (json.RawMessage, error) {
	version := opt.Version
	rt := &router.Router{TrustedProxies: snap.Settings.TrustedProxies}
	if _, port, err := net.SplitHostPort(snap.Settings.HTTPSListen); err == nil {
		rt.HTTPSPort, _ = strconv.Atoi(port)
	}

	table, err := routeTable(snap, opt.Previous)
	if err != nil {
		return nil, err
	}
	out.Table = table
	// The routing table is bulk: it goes by reference.
	rt.RoutesRef = configref.Put(version, "routes", table)

	// The service proxies go by reference too: at thousands of services
	// their configs were most of the JSON Caddy decodes on every load.
	proxies, err := compileProxies(table.Services(), idx, opt.Proxies, out)
	if err != nil {
		return nil, err
	}
	if opt.Pool != nil {
		rt.ServicesRef = configref.Put(version, "services", &router.PooledProxies{Proxies: proxies, Pool: opt.Pool})
	} else {
		rt.ServicesRef = configref.Put(version, "services", proxies)
	}

	var used map[int64]bool
	rt.Chains, used = compileChains(snap, table)
	// Plugin configs hold secrets (http-log headers, a wasm plugin's
	// configuration): they go by reference.
	pluginConfigs := router.PluginConfigs{}
	for i := range snap.Plugins {
		p := &snap.Plugins[i]
		if !used[p.ID] {
			continue
		}
		raw, err := compilePlugin(snap, p, opt.PluginInternals[p.Type])
		if err != nil {
			return nil, err
		}
		pluginConfigs[p.ID] = router.PluginConfig{Module: plugins.ModuleName(p.Type), Config: raw}
	}
	if len(pluginConfigs) > 0 {
		rt.PluginsRef = configref.Put(version, "plugins", pluginConfigs)
	}

	// Credentials are secrets: the table goes by reference.
	rt.ConsumersRef = configref.Put(version, "consumers", consumers.NewTable(storage.CompileConsumers(snap)))
	return moduleObject(rt, "handler", "gateway_router")
}

// routeTable is the routing table of the enabled routes: prev updated with
// the snapshot's route changes when both are known (the cost of a change
// is then that of the changed rows), else a new table.
func routeTable(snap *storage.Snapshot, prev *router.Table) (*router.Table, error) {
	if prev != nil && snap.RouteChanges != nil {
		var ups []router.Route
		removed := snap.RouteChanges.Removed
		for i := range snap.RouteChanges.Upserted {
			r := &snap.RouteChanges.Upserted[i]
			if r.Enabled {
				ups = append(ups, compileRoute(r))
			} else {
				removed = append(removed, r.ID)
			}
		}
		return prev.With(ups, removed)
	}
	all, err := snap.AllRoutes()
	if err != nil {
		return nil, err
	}
	routes := make([]router.Route, 0, len(all))
	for i := range all {
		if r := &all[i]; r.Enabled {
			routes = append(routes, compileRoute(r))
		}
	}
	return router.NewTable(routes)
}

// compileRoute is a route as the router matches it. It shares the row's
// slices (the store's cache replaces rows, never changes them).
func compileRoute(r *storage.Route) router.Route {
	cr := router.Route{
		ID: r.ID, Name: r.Name, ServiceID: r.ServiceID, Priority: r.Priority,
		Hosts: r.Hosts, Paths: r.Paths, Methods: r.Methods, Headers: r.Headers,
		StripPath: r.StripPath, PreserveHost: r.PreserveHost,
	}
	if len(cr.Headers) == 0 {
		cr.Headers = nil
	}
	if len(r.Splits) > 0 {
		cr.Splits = make([]router.Split, len(r.Splits))
		for i, sp := range r.Splits {
			cr.Splits[i] = router.Split{ServiceID: sp.ServiceID, Weight: sp.Weight}
		}
	}
	return cr
}

// compilePlugin is one plugin instance's handler: its API config with the
// compiler's internals added, and those of its type (typed: nil when the
// type has none).
func compilePlugin(snap *storage.Snapshot, p *storage.Plugin, typed TypeInternals) (json.RawMessage, error) {
	internals := pluginInternals(p)
	if typed != nil {
		extra, err := typed(snap, p)
		if err != nil {
			return nil, err
		}
		for k, v := range extra {
			internals[k] = v
		}
	}
	return plugins.ConfigJSON(p.Type, p.Config, internals)
}

// pluginInternals are the fields the compiler adds to a plugin instance's
// handler config that are not part of its API config: the instance id that
// keys its process-wide state (rate-limit counters, cache entries, log
// queues) so that the state survives reloads. It mixes the row's creation
// time into the id: SQLite may give a new plugin the id of the last deleted
// one, which must not inherit that one's counters.
func pluginInternals(p *storage.Plugin) map[string]any {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", p.ID, p.CreatedAt.UnixNano())
	return map[string]any{"instance_id": int64(h.Sum64() >> 1)}
}

// TypeInternals returns the compiler-set fields of one plugin type's handler
// config that come from other resources of the snapshot (a wasm plugin's
// module_sha256: the module's bytes reach the handler by reference, never
// through Caddy's JSON). An error fails the mutation (a FieldError is 400).
type TypeInternals func(snap *storage.Snapshot, p *storage.Plugin) (map[string]any, error)

// compileChains resolves the plugin chains: for every route, the most
// specific enabled instance of each plugin type (route > service > global),
// ordered by ordering, then id. Routes without route-scoped plugins share
// their service's chain (or the default chain of global plugins), so the
// chains are compiled per service and per route with route plugins, never
// per route of the table. used are the plugin ids some chain runs.
//
// A service chain is compiled for every service that is some route's
// service_id, and the default chain whenever such a service has no chain
// of its own.
func compileChains(snap *storage.Snapshot, table *router.Table) (*router.Chains, map[int64]bool) {
	global := map[string]*storage.Plugin{}
	byService := map[int64]map[string]*storage.Plugin{}
	byRoute := map[int64]map[string]*storage.Plugin{}
	for i := range snap.Plugins {
		p := &snap.Plugins[i]
		if !p.Enabled {
			continue // a disabled plugin neither applies nor shadows
		}
		switch {
		case p.Scope == "route" && p.RouteID != nil:
			if byRoute[*p.RouteID] == nil {
				byRoute[*p.RouteID] = map[string]*storage.Plugin{}
			}
			byRoute[*p.RouteID][p.Type] = p
		case p.Scope == "service" && p.ServiceID != nil:
			if byService[*p.ServiceID] == nil {
				byService[*p.ServiceID] = map[string]*storage.Plugin{}
			}
			byService[*p.ServiceID][p.Type] = p
		case p.Scope == "global":
			global[p.Type] = p
		}
	}
	used := map[int64]bool{}
	chain := func(levels ...map[string]*storage.Plugin) []int64 {
		eff := map[string]*storage.Plugin{}
		for _, l := range levels {
			for t, p := range l {
				eff[t] = p
			}
		}
		list := make([]*storage.Plugin, 0, len(eff))
		for _, p := range eff {
			list = append(list, p)
		}
		sort.Slice(list, func(i, j int) bool { return pluginLess(list[i], list[j]) })
		ids := make([]int64, len(list))
		for i, p := range list {
			ids[i] = p.ID
			used[p.ID] = true
		}
		return ids
	}
	out := &router.Chains{}
	for id, ps := range byService {
		if table.RoutesOfService(id) == 0 {
			continue
		}
		if out.Services == nil {
			out.Services = map[int64][]int64{}
		}
		out.Services[id] = chain(global, ps)
	}
	for id, ps := range byRoute {
		r := table.Route(id)
		if r == nil {
			continue // disabled
		}
		if out.Routes == nil {
			out.Routes = map[int64][]int64{}
		}
		out.Routes[id] = chain(global, byService[r.ServiceID], ps)
	}
	if len(global) > 0 {
		for _, id := range table.Services() {
			if table.RoutesOfService(id) > 0 && out.Services[id] == nil {
				out.Default = chain(global)
				break
			}
		}
	}
	if out.Default == nil && out.Services == nil && out.Routes == nil {
		return nil, used
	}
	return out, used
}

// pluginLess orders plugins by ordering, then id (lists and chains alike).
func pluginLess(a, b *storage.Plugin) bool {
	oa, ob := ordering(a), ordering(b)
	if oa != ob {
		return oa < ob
	}
	return a.ID < b.ID
}

func ordering(p *storage.Plugin) int32 {
	if p.Ordering != nil {
		return *p.Ordering
	}
	if t, ok := plugins.Lookup(p.Type); ok {
		return int32(t.Ordering)
	}
	return 0
}

// moduleObject encodes v with its module name under key, as
// caddyconfig.JSONModuleObject does, but without decoding v's JSON into
// untyped values and encoding it again: the router carries plugin configs
// whose 64-bit integers (instance ids) a float64 round trip would change,
// and the proxies are compiled on every change.
func moduleObject(v any, key, name string) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	if len(raw) < 2 || raw[0] != '{' {
		return nil, fmt.Errorf("encoding %s: not a JSON object", name)
	}
	head, _ := json.Marshal(map[string]string{key: name})
	out := make([]byte, 0, len(raw)+len(head))
	out = append(out, head[:len(head)-1]...)
	if len(raw) > 2 {
		out = append(out, ',')
	}
	return append(out, raw[1:]...), nil
}
