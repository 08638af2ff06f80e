package resources

import (
	"encoding/json"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/domain"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// listenerNote is what stream-route answers say about listen_addr changes
// (they bind at the next process start; docs/routing.md, stream routes).
const listenerNote = "listener changes take effect on restart"

var streamRoutes = api.Resource[storage.StreamRoute]{
	Kind:  "stream route",
	Check: domain.CheckStreamRoute,
}

func streamEndpoints() []*api.Endpoint {
	note := map[string]any{"type": "string", "enum": []any{listenerNote}}
	withNote := schema.JSONSchema(storage.StreamRoute{}, schema.Output)
	withNote["properties"].(map[string]any)["note"] = note
	deletedWithNote := map[string]any{"type": "object", "required": []string{"deleted", "note"}, "additionalProperties": false,
		"properties": map[string]any{"deleted": map[string]any{"type": "boolean", "enum": []any{true}}, "note": note}}
	const desc = "A TCP connection accepted on listen_addr is proxied to the service's targets with the service's algorithm, connect timeout and retries. " +
		"listen_addr is a literal IP:port or :port (port 1..65535) that collides with no other listener of the gateway: the admin API, Caddy's admin endpoint, the proxy listeners of the settings and this node's own (node_http_listen, node_https_listen), other stream routes (the same port on the same IP, or either on all interfaces; 400 otherwise). Listeners bind when the gateway starts: a new or changed listen_addr is stored at once and bound after a restart " +
		"(until then a route whose listen_addr changed is still served on the listener it was bound to, before a route since stored on that address); " +
		"changing only service_id (or the service's targets) applies live to new connections (open ones stay on their target). Deleting or disabling a route closes its open connections, and its listener closes new ones until a restart unbinds it."
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/stream-routes", Role: api.RoleViewer, Tag: "stream routes", Summary: "List stream routes",
			Response: storage.StreamRoute{}, ResponseList: true, Query: api.PageQuery, Statuses: []int{400}, Handle: streamRoutes.List},
		{Method: "POST", Path: "/api/v1/stream-routes", Role: api.RoleEditor, Tag: "stream routes", Summary: "Create a stream route",
			Description: desc, Body: storage.StreamRoute{}, ResponseSchema: withNote, Statuses: []int{400},
			Handle: func(c *api.Call) (any, error) {
				v, err := streamRoutes.Create(c, nil)
				return withListenerNote(v, err, true)
			}},
		{Method: "PUT", Path: "/api/v1/stream-routes/{id}", Role: api.RoleEditor, Tag: "stream routes",
			Summary:     "Replace a stream route (note only when listen_addr changed)",
			Description: desc, Body: storage.StreamRoute{}, ResponseSchema: withNote, Statuses: []int{400, 404},
			Handle: func(c *api.Call) (any, error) {
				changed := false
				v, err := streamRoutes.Replace(c, func(old, v *storage.StreamRoute) error {
					changed = old.ListenAddr != v.ListenAddr
					return nil
				})
				return withListenerNote(v, err, changed)
			}},
		{Method: "DELETE", Path: "/api/v1/stream-routes/{id}", Role: api.RoleEditor, Tag: "stream routes",
			Summary: "Delete a stream route (a restart unbinds its listener)", Description: desc,
			ResponseSchema: deletedWithNote, Statuses: []int{404},
			Handle: func(c *api.Call) (any, error) {
				if _, err := streamRoutes.Remove(c); err != nil {
					return nil, err
				}
				return map[string]any{"deleted": true, "note": listenerNote}, nil
			}},
	}
}

// withListenerNote adds the restart note to a stream route answer.
func withListenerNote(v any, err error, note bool) (any, error) {
	if err != nil || !note {
		return v, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["note"] = listenerNote
	return m, nil
}
