package compiler

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strconv"

	"github.com/caddy-gateway/gateway/modules/configref"
	"github.com/caddy-gateway/gateway/modules/consumers"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/router"
	"github.com/caddy-gateway/gateway/storage"
)

// compileRouter is the gateway_router handler: the routing table and the
// consumer table by reference, one reverse proxy per routed service, one
// handler per plugin instance some route runs.
func compileRouter(snap *storage.Snapshot, idx *snapIndex, version int64) (json.RawMessage, error) {
	rt := &router.Router{TrustedProxies: snap.Settings.TrustedProxies}
	if _, port, err := net.SplitHostPort(snap.Settings.HTTPSListen); err == nil {
		rt.HTTPSPort, _ = strconv.Atoi(port)
	}

	chains := effectivePlugins(snap)
	usedPlugins := map[int64]bool{}
	usedServices := map[int64]bool{}
	routes := make([]router.Route, 0, len(snap.Routes))
	for _, r := range snap.Routes {
		if !r.Enabled {
			continue
		}
		cr := router.Route{
			ID: r.ID, Name: r.Name, ServiceID: r.ServiceID, Priority: r.Priority,
			Hosts: r.Hosts, Paths: r.Paths, Methods: r.Methods, Headers: r.Headers,
			StripPath: r.StripPath, PreserveHost: r.PreserveHost,
		}
		usedServices[r.ServiceID] = true
		for _, sp := range r.Splits {
			cr.Splits = append(cr.Splits, router.Split{ServiceID: sp.ServiceID, Weight: sp.Weight})
			usedServices[sp.ServiceID] = true
		}
		for _, p := range chains[r.ID] {
			cr.Plugins = append(cr.Plugins, p.ID)
			usedPlugins[p.ID] = true
		}
		routes = append(routes, cr)
	}

	// The routing table is bulk: it goes by reference.
	rt.RoutesRef = configref.Put(version, "routes", routes)

	rt.ServicesRaw = map[string]json.RawMessage{}
	for id := range usedServices {
		svc, ok := idx.services[id]
		if !ok {
			return nil, fmt.Errorf("a route references service %d, which does not exist", id)
		}
		rt.ServicesRaw[strconv.FormatInt(id, 10)] = compileProxy(svc, idx.targets[id])
	}

	rt.PluginsRaw = map[string]json.RawMessage{}
	for i := range snap.Plugins {
		p := &snap.Plugins[i]
		if !usedPlugins[p.ID] {
			continue
		}
		raw, err := compilePlugin(snap, p)
		if err != nil {
			return nil, err
		}
		rt.PluginsRaw[strconv.FormatInt(p.ID, 10)] = raw
	}

	// Credentials are secrets: the table goes by reference.
	rt.ConsumersRef = configref.Put(version, "consumers", consumers.NewTable(compileConsumers(snap)))
	return moduleObject(rt, "handler", "gateway_router")
}

// moduleObject encodes v with its module name under key, as
// caddyconfig.JSONModuleObject does, but without decoding v's JSON into
// untyped values again: the router carries plugin configs whose 64-bit
// integers (instance ids) a float64 round trip would change.
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

// compilePlugin is one plugin instance's handler: its API config with the
// compiler's internals added.
func compilePlugin(snap *storage.Snapshot, p *storage.Plugin) (json.RawMessage, error) {
	internals := pluginInternals(p)
	if f := typeInternals[p.Type]; f != nil {
		extra, err := f(snap, p)
		if err != nil {
			return nil, err
		}
		for k, v := range extra {
			internals[k] = v
		}
	}
	return plugins.HandlerJSON(p.Type, p.Config, internals)
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

var typeInternals = map[string]TypeInternals{}

// RegisterTypeInternals installs the internals of a plugin type. Call from
// init only.
func RegisterTypeInternals(typeName string, f TypeInternals) { typeInternals[typeName] = f }

// effectivePlugins resolves, for every route, the most specific enabled
// instance of each plugin type (route > service > global) and orders them
// by ordering, then id.
func effectivePlugins(snap *storage.Snapshot) map[int64][]*storage.Plugin {
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
	out := map[int64][]*storage.Plugin{}
	for _, r := range snap.Routes {
		eff := map[string]*storage.Plugin{}
		for t, p := range global {
			eff[t] = p
		}
		for t, p := range byService[r.ServiceID] {
			eff[t] = p
		}
		for t, p := range byRoute[r.ID] {
			eff[t] = p
		}
		if len(eff) == 0 {
			continue
		}
		list := make([]*storage.Plugin, 0, len(eff))
		for _, p := range eff {
			list = append(list, p)
		}
		sort.Slice(list, func(i, j int) bool { return pluginLess(list[i], list[j]) })
		out[r.ID] = list
	}
	return out
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
