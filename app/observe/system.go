package observe

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/internal/health"
	"github.com/caddy-gateway/gateway/modules/router"
)

// systemEndpoints are liveness and the views of the live configuration.
func systemEndpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/healthz", Role: api.RolePublic, Tag: "system", Summary: "Liveness: the literal text ok",
			ContentType: "text/plain", Raw: func(c *api.Call) {
				c.W.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = c.W.Write([]byte("ok"))
			}},
		{Method: "GET", Path: "/api/v1/config", Role: api.RoleViewer, Tag: "observability", Summary: "Summary of the live compiled configuration",
			Response: ConfigSummary{}, Handle: configSummary},
		{Method: "GET", Path: "/api/v1/health", Role: api.RoleViewer, Tag: "observability",
			Summary: "Health of every target of every service",
			Description: "state is the active checks' result, except that a target that passive health took out of rotation (failed proxied requests: " +
				"connection errors, not answers; 2 within 10 s) is unhealthy until those failures expire, with last_error saying so. " +
				"Requests the gateway refuses itself (400, e.g. a header value a placeholder made invalid) never count against a target.",
			Response: health.Status{}, ResponseList: true, Handle: targetHealth},
		{Method: "GET", Path: "/api/v1/router/test", Role: api.RoleViewer, Tag: "observability",
			Summary: "Dry run of route matching: the route a request with these properties would take (no upstream is contacted)",
			Description: "Uses the live router's own match table and path normalization: path is taken as a client sends it (percent-encoding allowed), decoded, its runs of slashes merged and its dot segments removed (RFC 3986; .. at the root stays at the root) before matching; the answer's path is that normalized path. A path with control characters, or with a dot segment delimited by a backslash, is 400 (proxied requests get 400 too); so is one longer than 8192 bytes decoded (proxied requests get 414). headers is a comma-separated list of Name:value pairs; " +
				"a method override header among them (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override) naming a method that another route, or none, would be picked for is 400 naming headers (proxied requests get 400 too).",
			Query: []api.QueryParam{
				{Name: "path", Type: "string", Required: true}, {Name: "host", Type: "string"},
				{Name: "method", Type: "string", Description: "default GET"},
				{Name: "headers", Type: "string", Description: "comma-separated Name:value pairs"},
			},
			Response: RouterTestResult{}, Statuses: []int{400}, Handle: routerTest},
	}
}

// ConfigSummary is the live configuration's version and counts.
type ConfigSummary struct {
	Version      int64      `json:"version" doc:"The stored configuration version this node serves: incremented by every committed change, the same on every node of a cluster once they have converged."`
	AppliedAt    *time.Time `json:"applied_at"`
	Services     int        `json:"services"`
	Targets      int        `json:"targets"`
	Routes       int        `json:"routes"`
	StreamRoutes int        `json:"stream_routes"`
	Plugins      int        `json:"plugins"`
	Consumers    int        `json:"consumers"`
	Credentials  int        `json:"credentials"`
	Certificates int        `json:"certificates"`
	WasmModules  int        `json:"wasm_modules"`
}

func configSummary(c *api.Call) (any, error) {
	g, at := c.CP.Applied()
	out := ConfigSummary{}
	if g == nil {
		return out, nil
	}
	out.Version = g.ConfigVersion
	out.AppliedAt = at
	n := g.Counts
	out.Services, out.Targets, out.Routes, out.StreamRoutes = n["services"], n["targets"], n["routes"], n["stream_routes"]
	out.Plugins, out.Consumers, out.Credentials = n["plugins"], n["consumers"], n["credentials"]
	out.Certificates, out.WasmModules = n["certificates"], n["wasm_modules"]
	return out, nil
}

// targetHealth is the active checks' view, corrected by Caddy's passive
// health: a target that failed proxied requests is out of rotation until
// its failures expire, and the answer says so (the active checks may still
// pass: a target that accepts connections but breaks requests).
func targetHealth(c *api.Call) (any, error) {
	out := c.CP.Health().Statuses()
	rt := c.CP.Router()
	if rt == nil {
		return out, nil
	}
	for i := range out {
		s := &out[i]
		fails, down := rt.PassiveDown(s.ServiceID, net.JoinHostPort(s.Host, strconv.Itoa(s.Port)))
		if !down {
			continue
		}
		s.State = health.Unhealthy
		msg := fmt.Sprintf("passive health: %d failed proxied requests recently; out of rotation until they expire", fails)
		if s.LastError != nil {
			msg += "; last check: " + *s.LastError
		}
		s.LastError = &msg
	}
	return out, nil
}

// RouterTestResult is the dry run's answer.
type RouterTestResult struct {
	Matched      bool           `json:"matched"`
	Path         string         `json:"path" doc:"The path the router matches: the given path percent-decoded, with its runs of slashes merged and its dot segments removed (RFC 3986), as for proxied requests."`
	RouteID      *int64         `json:"route_id"`
	RouteName    *string        `json:"route_name"`
	ServiceID    *int64         `json:"service_id" doc:"The split's pick when the route has splits."`
	MatchedPath  *string        `json:"matched_path"`
	UpstreamPath *string        `json:"upstream_path"`
	Splits       []router.Split `json:"splits"`
	Reason       *string        `json:"reason" doc:"Why nothing matched."`
}

func routerTest(c *api.Call) (any, error) {
	q := c.R.URL.Query()
	path := q.Get("path")
	if !q.Has("path") || path == "" {
		return nil, api.BadRequest("path: is required")
	}
	if !strings.HasPrefix(path, "/") {
		return nil, api.BadRequest("path: must start with /")
	}
	// The path as a client sends it: decoded and normalized as the router
	// does with a proxied request's.
	decoded, err := url.PathUnescape(path)
	if err != nil {
		return nil, api.BadRequest("path: invalid percent-encoding")
	}
	if path, err = router.NormalizePath(decoded); err != nil {
		return nil, api.BadRequest("path: " + err.Error())
	}
	method := q.Get("method")
	if method == "" {
		method = http.MethodGet
	}
	hdr := http.Header{}
	if hs := q.Get("headers"); hs != "" {
		for _, pair := range strings.Split(hs, ",") {
			name, value, ok := strings.Cut(pair, ":")
			name = strings.TrimSpace(name)
			if !ok || name == "" {
				return nil, api.BadRequest("headers: each entry must be Name:value")
			}
			hdr.Add(name, strings.TrimSpace(value))
		}
	}
	out := RouterTestResult{Path: path, Splits: []router.Split{}}
	rt := c.CP.Router()
	if rt == nil {
		out.Reason = ptr("the gateway has not loaded its configuration yet")
		return out, nil
	}
	req := router.Request{Host: q.Get("host"), Path: path, Method: strings.ToUpper(method), Header: hdr}
	_, m, err := rt.Table().Resolve(req) // the path is normalized already
	if errors.Is(err, router.ErrMethodOverride) {
		return nil, api.BadRequest("headers: " + err.Error())
	}
	if err != nil {
		return nil, api.BadRequest("path: " + err.Error())
	}
	if m.Route == nil {
		out.Reason = ptr(rt.Table().Explain(req))
		return out, nil
	}
	up, err := router.ForwardPath(m.Route, m.MatchedPath, path) // as the proxy forwards it
	if err != nil {
		return nil, api.BadRequest("path: " + err.Error())
	}
	out.Matched = true
	out.RouteID = ptr(m.Route.ID)
	out.RouteName = ptr(m.Route.Name)
	out.ServiceID = ptr(rt.PickService(m.Route.ID))
	out.MatchedPath = ptr(m.MatchedPath)
	out.UpstreamPath = ptr(up)
	if m.Route.Splits != nil {
		out.Splits = m.Route.Splits
	}
	return out, nil
}
