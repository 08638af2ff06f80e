// Package pluginapi is the admin API of plugins, consumers, credentials and
// the proxy-cache purge:
//
//	GET/POST        /api/v1/plugins
//	GET/PUT/DELETE  /api/v1/plugins/{id}
//	POST            /api/v1/cache/purge
//	GET/POST        /api/v1/consumers
//	GET/PUT/DELETE  /api/v1/consumers/{id}
//	GET/POST        /api/v1/consumers/{consumer_id}/credentials
//	DELETE          /api/v1/credentials/{id}
//
// Every mutation goes through the control plane's Mutate: persisted in a
// transaction, compiled and loaded into the running proxy before the answer.
package pluginapi

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// Endpoints are the plugin, consumer and credential endpoints.
func Endpoints() []*api.Endpoint { return append(pluginEndpoints(), consumerEndpoints()...) }

var pluginResource = api.Resource[storage.Plugin]{
	Kind:     "plugin",
	Order:    "ordering, id",
	ReadView: pluginView,
}

// pluginsOf is the plugin resource as c writes it: checked by CheckPlugin
// with the references c's control plane knows (AddPluginRefs).
func pluginsOf(c *api.Call) api.Resource[storage.Plugin] {
	res := pluginResource
	res.Check = func(tx *gorm.DB, p *storage.Plugin) error { return CheckPlugin(c.CP, tx, p) }
	return res
}

// pluginView is a plugin as a reader sees it: viewers get the config's
// secret fields (the type's `schema:"secret"` fields, e.g. http-log
// endpoint credentials and headers) redacted; editors, who may change
// them, see them.
func pluginView(c *api.Call, p *storage.Plugin) any {
	if !isViewer(c) {
		return p
	}
	out := *p
	out.Config, _ = plugins.RedactConfig(p.Type, p.Config)
	return &out
}

// CheckPlugin validates a plugin inside the mutation's transaction tx: the
// scope rules already ran (storage.Plugin.Validate); here the type, the
// referenced service or route, the config (normalized: every field, defaults
// filled) and the rows it names (cp's plugin references: a wasm plugin's
// module), the default ordering and the one-per-type-per-target rule. The
// plugin endpoints, the configuration import and applications run it.
func CheckPlugin(cp *controlplane.ControlPlane, tx *gorm.DB, p *storage.Plugin) error {
	t, ok := plugins.Lookup(p.Type)
	if !ok {
		return schema.Errorf("type", "unknown plugin type %q", p.Type)
	}
	if p.ServiceID != nil {
		if err := api.Exists[storage.Service](tx, "service_id", *p.ServiceID); err != nil {
			return err
		}
	}
	if p.RouteID != nil {
		if err := api.Exists[storage.Route](tx, "route_id", *p.RouteID); err != nil {
			return err
		}
	}
	if raw := bytes.TrimSpace(p.Config); len(raw) > 0 && raw[0] != '{' {
		return schema.Errorf("config", "must be an object")
	}
	cfg, err := plugins.NormalizeConfig(p.Type, p.Config)
	if err != nil {
		return err
	}
	p.Config = cfg
	if err := cp.CheckPluginRefs(tx, p); err != nil {
		return err
	}
	if p.Ordering == nil {
		o := int32(t.Ordering)
		p.Ordering = &o
	}

	q := tx.Model(&storage.Plugin{}).Where("type = ? AND scope = ?", p.Type, p.Scope)
	target := "globally"
	switch p.Scope {
	case "service":
		q = q.Where("service_id = ?", *p.ServiceID)
		target = fmt.Sprintf("for service %d", *p.ServiceID)
	case "route":
		q = q.Where("route_id = ?", *p.RouteID)
		target = fmt.Sprintf("for route %d", *p.RouteID)
	}
	if p.ID != 0 {
		q = q.Where("id <> ?", p.ID)
	}
	var other []int64
	if err := q.Limit(1).Pluck("id", &other).Error; err != nil {
		return err
	}
	if len(other) > 0 {
		return schema.Errorf("type", "a %s plugin already exists %s (plugin %d); one plugin of a type per scope target", p.Type, target, other[0])
	}
	return nil
}

const pluginDescription = "A plugin is scoped globally, to a service (service_id) or to a route (route_id). " +
	"One plugin of a type per scope target: a second one, or a PUT moving a plugin onto an occupied target, is 400. " +
	"For a request, the most specific enabled instance of each type applies (route, then service, then global); a disabled plugin neither applies nor shadows. " +
	"Plugins run in ascending ordering, then id; ordering defaults to the type's default ordering. " +
	"One exception keeps cached responses inside authentication: a proxy-cache whose ordering is lower than that of an access plugin of the same chain (key-auth, basic-auth, jwt, acl, ip-restriction) runs right after the last of them. " +
	"config is validated by the type's declaration (unknown fields are 400, errors name the field as config.<field>); answers show every config field with defaults filled. " +
	"Only registered plugin types are accepted; others are 400 \"unknown plugin type\"."

func pluginEndpoints() []*api.Endpoint {
	eps := pluginResource.CRUD("/api/v1/plugins", "plugins", api.RoleViewer, api.RoleEditor, storage.Plugin{})
	one, list := pluginOutputSchema()
	in := pluginInputSchema()
	for _, ep := range eps {
		ep.Description = pluginDescription
		switch ep.Method {
		case "POST":
			ep.BodySchema = in
			ep.Handle = func(c *api.Call) (any, error) { return pluginsOf(c).Create(c, nil) }
		case "PUT":
			ep.BodySchema = in
			ep.Handle = func(c *api.Call) (any, error) { return pluginsOf(c).Replace(c, nil) }
		}
		switch {
		case ep.Method == "GET" && ep.Path == "/api/v1/plugins":
			ep.Summary = "List plugins (ordered by ordering, then id)"
			ep.ResponseSchema = list
		case ep.Method != "DELETE":
			ep.ResponseSchema = one
		}
	}
	eps = append(eps, &api.Endpoint{
		Method: "POST", Path: "/api/v1/cache/purge", Role: api.RoleEditor, Tag: "plugins",
		Summary:     "Purge the proxy cache",
		Description: "Removes every in-memory proxy-cache entry of every proxy-cache plugin instance and answers how many were removed.",
		Response:    PurgeResult{},
		Handle:      purgeCache,
	})
	return eps
}

// pluginInputSchema is the request body of POST and PUT: the declaration's
// input schema whose config is the PluginConfig of its type (the OpenAPI
// document's PluginConfig_<type> components, one per registered type, built
// from the same declarations), so that /docs shows every type's fields
// instead of "any".
func pluginInputSchema() map[string]any {
	in := schema.JSONSchema(storage.Plugin{}, schema.Input)
	if props, ok := in["properties"].(map[string]any); ok {
		props["config"] = map[string]any{"$ref": "#/components/schemas/PluginConfig"}
	}
	types := plugins.Types()
	sort.SliceStable(types, func(i, j int) bool { return types[i].Name < types[j].Name })
	var cases []any
	for _, t := range types {
		ref := "#/components/schemas/PluginConfig_" + strings.ReplaceAll(t.Name, "-", "_")
		cases = append(cases, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": t.Name}}},
			"then": map[string]any{"properties": map[string]any{"config": map[string]any{"$ref": ref}}},
		})
	}
	if len(cases) > 0 {
		in["allOf"] = cases
	}
	return in
}

// pluginOutputSchema is the answer schema of a plugin (and of the list):
// the declaration's output schema, with config described per registered
// type (if type is X then config is X's declaration).
func pluginOutputSchema() (one, list map[string]any) {
	one = schema.JSONSchema(storage.Plugin{}, schema.Output)
	if props, ok := one["properties"].(map[string]any); ok {
		if c, ok := props["config"].(map[string]any); ok {
			c["type"] = "object" // always an object, every field of its type (below)
		}
	}
	types := plugins.Types()
	sort.SliceStable(types, func(i, j int) bool { return types[i].Name < types[j].Name })
	var cases []any
	for _, t := range types {
		cases = append(cases, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": t.Name}}},
			"then": map[string]any{"properties": map[string]any{"config": schema.JSONSchema(t.New(), schema.Output)}},
		})
	}
	if len(cases) > 0 {
		one["allOf"] = cases
	}
	return one, map[string]any{"type": "array", "items": one}
}
