package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// apiDescription records the decisions taken where the specification is
// silent; it heads the served OpenAPI document.
const apiDescription = `Admin API of Caddy Gateway: upstream services, targets, routes, stream
routes, plugins, consumers and credentials, applications, settings,
observability, export and import.

Every mutation is persisted and hot-reloaded into the running proxy before
the answer. PUT is a full replacement. Creates and deletes answer 200.
Errors are {"error": message} naming the field.

Decisions where the specification is silent:
- A path id must be an Id written canonically: decimal digits, no sign, no
  leading zero, no space, 1..9223372036854775807 ("01", "+1", "-1", "abc",
  "1.0", " 1" or an overflowing number is 400). A GET, PUT or DELETE
  addressing a valid id that does not exist is 404; for PUT this is decided
  before the body is validated. Listing the targets or credentials of a
  valid id that does not exist answers [].
- Input rules of every string field, item, map key and value: valid UTF-8
  without control characters (U+0000..U+001F, U+007F; multi-line fields
  such as PEM and raw bodies allow tab, CR and LF), at most 4096
  characters unless the field says otherwise (names 255, hosts 253, paths
  4096, header names 256, header values 8192); names must not be blank;
  hosts are ASCII without spaces; header names are RFC 9110 tokens. Arrays
  and objects hold at most 1000 entries unless the field says otherwise.
  Every integer has its bounds in its schema. Violations are 400 naming
  the field by its full path (groups[0], set_headers.X-A). Text is taken
  as written: a string with invalid UTF-8 bytes or an unpaired surrogate
  escape (\ud800) is 400, never stored with U+FFFD in their place.
- URL fields a connection or redirect goes to (http-log endpoint, redirect
  location, public_url, SSO issuer, ACME directories) are absolute http or
  https URLs with a host, a port 1..65535 when given and no fragment; ACME
  directories are https only. Hosts there and target hosts are IP
  addresses or DNS names; a name whose last label is a number (127.1,
  2130706433, 0x7f000001) is 400, since resolvers disagree on it.
- Unknown paths: once authentication is enabled, a request under /api/ that
  matches no endpoint needs credentials like any endpoint (401 before 404
  or 405). A path served for other methods answers 405 with an Allow
  header listing them (and {"error"}); any other path 404.
- CSRF: a POST, PUT, PATCH or DELETE that a browser sends from another
  origin (Sec-Fetch-Site cross-site or same-site, or an Origin that is
  neither the request's host nor the origin of settings.public_url) is 403,
  whatever its credentials; same-origin requests and non-browser clients
  pass with any Content-Type.
- DNS rebinding: when the admin listener is bound to one address (the
  default 127.0.0.1:9080), a request whose Host is neither an IP address,
  nor localhost, nor the host of settings.public_url is 403 {"error"} on
  every path, public ones included; a listener on all interfaces (0.0.0.0,
  ::) does not check the Host.
- Route literal paths must start with "/"; regex paths start with "~".
- The tie-break "more method and header conditions" counts 1 for a
  non-empty methods list plus 1 per header condition. Two wildcard host
  matches rank alike (no suffix-length rule): the path length decides next.
- Deleting a service also removes split entries pointing at it from other
  routes; a route left without split entries sends its traffic to its own
  service_id.
- Settings listener changes apply at once (no restart needed); a listener
  that cannot be bound is a 400 and nothing changes.
- Client headers the gateway never forwards: those the client's Connection
  header names (it cannot remove the gateway's own headers that way), and,
  from a client that is no trusted proxy, Forwarded, X-Real-IP,
  True-Client-IP, X-Client-IP, X-Original-URL, X-Rewrite-URL and the
  X-Forwarded-* beyond For/Proto/Host (which the gateway sets); from
  anyone, the admin API's cookies gateway_session and gateway_sso (a
  browser signed in to the dashboard sends them to the proxy on the same
  host name too); see docs/routing.md.
- Upstream errors made by the proxy are JSON {"error"} with status 502
  (bad gateway), 503 (no target available) or 504 (timeout).
- A proxied request whose request line and headers are longer than the
  gateway option max_header_size (default 16 KiB, as Caddy's servers) is
  431; one whose path is longer than 8192 bytes (decoded) is 414
  {"error"}, as nginx and Kong answer long request lines (regex routes
  cost time in proportion to the path); the dry run answers 400.
- The admin listener reads at most 64 KiB of a request's line and headers
  (431 past it), not Go's 1 MB.
- Targets (of routes and stream routes), health checks and http-log
  collectors never reach the gateway's own endpoints: its admin API,
  Caddy's admin endpoint, its proxy listeners and its stream listeners.
  Naming one is 400; a name that resolves to one, or a listener moved onto
  a target, answers 502 (a stream connection is closed). A target that is
  the proxy itself would send each request round again (a loop). A loop
  through something else (a load balancer in front of the gateway,
  another node) is cut by Via: a request that has passed through 16 Caddy
  proxies ("1.1 Caddy", which the proxy adds) is answered 508 {"error"}.
- The lists of services, routes, consumers, plugins and stream routes
  answer every item; ?limit=N&offset=M (integers, 0 or more) asks for a
  page of them in the list's order, still an array, with the header
  X-Total-Count (the number of items in all).
- Stream routes use their service's timeouts as nginx's proxy_timeout and
  Kong's stream services do: a connection on which neither side sends
  anything for read_timeout_ms (default 60 s; 0 never) is closed, and each
  write to either side must finish within write_timeout_ms.
- Metrics per route, consumer and stream route follow the running
  configuration: series carry the current name and end when the route is
  deleted or disabled or the consumer deleted (no stale series).
- A target's informational responses (102, 103 Early Hints) reach the
  client before the final response, with the target's 1xx headers only;
  more than 10 before the final response fail the attempt (502). 100
  Continue is the gateway's own: a client waiting for it gets no other 1xx.
- Target health: unknown until the first check; unhealthy targets get no
  traffic while a healthy one exists.
- Cluster mode (several nodes on one PostgreSQL store): a change made on
  any node is live on every node (GET /api/v1/cluster lists them and the
  configuration version each serves; GET /api/v1/config's version is the
  same on every node once converged). Certificates, ACME accounts,
  sessions and failed-login counts are shared. Per node by design: the
  Prometheus metrics (with a node label), GET /api/v1/metrics, the recent
  requests, the event stream, target health checks and the rate-limit
  plugin's counters (a limit of N allows up to N per node). While the
  database is unreachable, nodes keep serving their last configuration and
  admin requests that need the database answer 503 {"error"} without
  changing anything. So do changes while the gateway cannot read the rest
  of the running Caddy config from Caddy's admin endpoint (admin off, or
  caddy_admin not its address): it never replaces what it cannot read.
  A change overtaken by a load of the running Caddy config (caddy reload,
  or Caddy's admin API) while it was being applied is 503 too, with
  nothing changed: retrying applies it on top of that load.
- gRPC and HTTP/3 (extensions, docs/grpc.md): services of protocol grpc
  (h2c) and grpcs (HTTP/2 over TLS); the settings h2c (cleartext HTTP/2 on
  the HTTP listener, default false) and http3 (default true); answers the
  gateway makes itself to an application/grpc* request are trailers-only
  gRPC statuses (HTTP 200, grpc-status, grpc-message), and the request
  record keeps the HTTP status meant and grpc_status.
`

// DocEndpoints serve the OpenAPI document and its rendering.
func DocEndpoints() []*Endpoint {
	return []*Endpoint{
		{Method: "GET", Path: "/openapi.yaml", Role: RolePublic, Tag: "system", Summary: "This OpenAPI 3.1 document (YAML)",
			ContentType: "application/yaml", Raw: serveOpenAPIYAML},
		{Method: "GET", Path: "/openapi.json", Role: RolePublic, Tag: "system", Summary: "This OpenAPI 3.1 document (JSON)",
			ResponseSchema: map[string]any{"type": "object"}, Raw: serveOpenAPIJSON},
		{Method: "GET", Path: "/docs", Role: RolePublic, Tag: "system", Summary: "API reference rendered from the OpenAPI document",
			ContentType: "text/html", Raw: serveDocs},
	}
}

var (
	docOnce sync.Once
	docMap  map[string]any
)

// OpenAPI returns the OpenAPI document of the endpoints a serves.
func (a *API) OpenAPI() map[string]any {
	docOnce.Do(func() { docMap = buildOpenAPI(a.endpoints) })
	return docMap
}

func serveOpenAPIYAML(c *Call) {
	b, err := yaml.Marshal(c.API.OpenAPI())
	if err != nil {
		c.Fail(err)
		return
	}
	c.W.Header().Set("Content-Type", "application/yaml")
	_, _ = c.W.Write(b)
}

func serveOpenAPIJSON(c *Call) { WriteJSON(c.W, http.StatusOK, c.API.OpenAPI()) }

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

type docBuilder struct {
	schemas map[string]any
}

func buildOpenAPI(eps []*Endpoint) map[string]any {
	b := &docBuilder{schemas: map[string]any{
		"Error": map[string]any{"type": "object", "required": []string{"error"},
			"properties": map[string]any{"error": map[string]any{"type": "string"}}},
	}}
	paths := map[string]any{}
	for _, ep := range eps {
		item, _ := paths[ep.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[ep.Path] = item
		}
		item[strings.ToLower(ep.Method)] = b.operation(ep)
	}
	b.pluginSchemas()
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Caddy Gateway Admin API",
			"version":     "0.1.0",
			"description": apiDescription,
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": b.schemas,
			"securitySchemes": map[string]any{
				"bearer":     map[string]any{"type": "http", "scheme": "bearer", "description": "The admin token."},
				"adminToken": map[string]any{"type": "apiKey", "in": "header", "name": "X-Admin-Token"},
				"session":    map[string]any{"type": "apiKey", "in": "cookie", "name": "gateway_session"},
			},
		},
	}
}

func (b *docBuilder) operation(ep *Endpoint) map[string]any {
	op := map[string]any{
		"summary":     ep.Summary,
		"operationId": operationID(ep),
		"tags":        []string{ep.Tag},
	}
	desc := ep.Description
	if ep.Role != RolePublic {
		desc = strings.TrimSpace("Least role: " + ep.Role.String() + ". " + desc)
		op["security"] = []any{map[string]any{"bearer": []any{}}, map[string]any{"adminToken": []any{}}, map[string]any{"session": []any{}}}
	} else {
		op["security"] = []any{}
	}
	if desc != "" {
		op["description"] = desc
	}
	var params []any
	for _, m := range pathParam.FindAllStringSubmatch(ep.Path, -1) {
		params = append(params, map[string]any{
			"name": m[1], "in": "path", "required": true,
			"schema": map[string]any{"type": "integer", "format": "int64", "minimum": 1},
		})
	}
	for _, q := range ep.Query {
		p := map[string]any{"name": q.Name, "in": "query", "required": q.Required, "schema": map[string]any{"type": q.Type}}
		if q.Description != "" {
			p["description"] = q.Description
		}
		params = append(params, p)
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	switch {
	case ep.BodySchema != nil:
		op["requestBody"] = map[string]any{
			"required": true,
			"content":  map[string]any{"application/json": map[string]any{"schema": ep.BodySchema}},
		}
	case ep.Body != nil:
		op["requestBody"] = map[string]any{
			"required": true,
			"content":  map[string]any{"application/json": map[string]any{"schema": b.ref(ep.Body, schema.Input)}},
		}
	}
	if rb, ok := op["requestBody"].(map[string]any); ok {
		rb["description"] = "At most " + byteSize(ep.BodyLimit()) + " (400 past it)."
	}
	responses := map[string]any{}
	ok := map[string]any{"description": "OK"}
	switch {
	case ep.ResponseSchema != nil:
		ok["content"] = map[string]any{contentType(ep): map[string]any{"schema": ep.ResponseSchema}}
	case ep.Response != nil:
		s := b.ref(ep.Response, schema.Output)
		if ep.ResponseList {
			s = map[string]any{"type": "array", "items": s}
		}
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": s}}
	case ep.ContentType != "":
		ok["content"] = map[string]any{ep.ContentType: map[string]any{"schema": map[string]any{"type": "string"}}}
	}
	responses["200"] = ok
	statuses := append([]int{}, ep.Statuses...)
	if ep.Role != RolePublic {
		// 503: the database is unreachable, or the running Caddy config
		// changed meanwhile (nothing was changed).
		statuses = append(statuses, 401, 403, 500, 503)
	}
	// 403: a Host the admin listener does not answer to (DNS rebinding),
	// and for unsafe methods a cross-origin browser request (CSRF).
	statuses = append(statuses, 403)
	if pathParam.MatchString(ep.Path) {
		statuses = append(statuses, 400) // a path id that is not an Id
	}
	for _, st := range statuses {
		key := strconv.Itoa(st)
		if _, dup := responses[key]; dup {
			continue
		}
		r := map[string]any{"description": http.StatusText(st)}
		if st >= 400 {
			r["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}
		}
		responses[key] = r
	}
	op["responses"] = responses
	return op
}

func contentType(ep *Endpoint) string {
	if ep.ContentType != "" {
		return ep.ContentType
	}
	return "application/json"
}

func operationID(ep *Endpoint) string {
	p := pathParam.ReplaceAllString(ep.Path, "by_$1")
	if rest, ok := strings.CutPrefix(p, "/api/v1/"); ok {
		p = rest
	} else {
		p = "root_" + p // /metrics and /api/v1/metrics must not share an id
	}
	p = strings.NewReplacer("/", "_", "-", "_", ".", "_").Replace(p)
	return strings.ToLower(ep.Method) + "_" + strings.Trim(p, "_")
}

// ref registers the declaration's schema under its type name and returns a
// $ref to it.
func (b *docBuilder) ref(decl any, mode schema.Mode) map[string]any {
	t := reflect.TypeOf(decl)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.Name()
	if mode == schema.Input {
		name += "Input"
	}
	if _, ok := b.schemas[name]; !ok {
		b.schemas[name] = schema.JSONSchema(decl, mode)
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// pluginSchemas adds one config schema per registered plugin type, so the
// document shows every type's fields and defaults.
func (b *docBuilder) pluginSchemas() {
	types := plugins.Types()
	sort.Slice(types, func(i, j int) bool { return types[i].Name < types[j].Name })
	var refs []any
	for _, t := range types {
		name := "PluginConfig_" + strings.ReplaceAll(t.Name, "-", "_")
		s := schema.JSONSchema(t.New(), schema.Input)
		s["title"] = t.Name // the type's name, for clients that list the accepted types (the dashboard)
		s["description"] = strings.TrimSpace("config of the " + t.Name + " plugin type (default ordering " + strconv.Itoa(t.Ordering) + "). " + t.Doc)
		if t.Extension {
			s["description"] = "Extension (beside the contract's plugin types): " + s["description"].(string)
			s["x-extension"] = true
		}
		b.schemas[name] = s
		refs = append(refs, map[string]any{"$ref": "#/components/schemas/" + name})
	}
	if len(refs) > 0 {
		b.schemas["PluginConfig"] = map[string]any{"description": "The config object of a plugin; its shape depends on type.", "anyOf": refs}
	}
}

// documentJSON is the document as JSON bytes (tests validate it).
func documentJSON(a *API) []byte {
	j, _ := json.Marshal(a.OpenAPI())
	return j
}
