package traffic

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// RequestTransform is the request-transform plugin: it changes the headers
// and query of the request the upstream receives. Header operations run in
// the order remove, rename, set, add; query operations remove, then set.
// Values may use the request's Caddy placeholders, such as
// {http.request.remote.host}; other placeholders (files, environment) are
// refused (package placeholders). What the values with placeholders expand
// to for one request is bounded (maxExpanded): a request that would take
// them past it is answered 431.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile (map fields
// take one "key value" per line):
//
//	gateway_request_transform {
//	    remove_headers X-Debug X-Internal-*
//	    rename_headers X-Old X-New
//	    set_headers X-Real-IP {http.request.remote.host}
//	    add_headers X-Via gateway
//	    remove_query debug
//	    set_query source gateway
//	}
type RequestTransform struct {
	HeaderTransform
	RemoveQuery []string          `json:"remove_query" schema:"maxItems=100" doc:"Query parameter names to remove."`
	SetQuery    map[string]string `json:"set_query" schema:"placeholders,maxItems=100" doc:"Query parameter name → value, replacing existing values. Values may use the request's placeholders ({http.request.*} but its body, {http.vars.client_ip}, {http.vars.request_id}, {time.now*}); any other ({env.*}, {file.*} …) is 400; \\{ and \\} are literal braces. The values with placeholders of set_headers, add_headers and set_query together expand to at most 64 KiB per request: a request whose values take them past it is answered 431 naming the header or parameter."`

	query []field // set_query, sorted, prepared by Provision
}

// SetDefaults implements schema.Defaulter.
func (h *RequestTransform) SetDefaults() {
	h.HeaderTransform.setDefaults()
	h.RemoveQuery = []string{}
	h.SetQuery = map[string]string{}
}

// CaddyModule returns the Caddy module information.
func (*RequestTransform) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[RequestTransform]("request-transform")
}

// Provision checks the config with the admin API's rules and prepares the
// header operations.
func (h *RequestTransform) Provision(caddy.Context) error {
	if err := h.HeaderTransform.provision(h); err != nil {
		return err
	}
	h.query = newFields(h.SetQuery, false)
	return nil
}

// Validate implements schema.Validator and caddy.Validator.
func (h *RequestTransform) Validate() error {
	if err := h.HeaderTransform.check(); err != nil {
		return err
	}
	for i, k := range h.RemoveQuery {
		if k == "" {
			return schema.Errorf(idx("remove_query", i), "must not be empty")
		}
	}
	if _, ok := h.SetQuery[""]; ok {
		return schema.Errorf("set_query", "keys must not be empty")
	}
	return nil
}

// ServeHTTP transforms the request, then calls next. A request whose
// values make the plugin's expanded values longer than maxExpanded is
// answered 431 naming the header (or query parameter) that went past it:
// the request's own fields are what made it large (the configured text is
// at most 8,192 characters a value).
func (h *RequestTransform) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	b := budget(maxExpanded)
	if !h.headers.empty() {
		host := r.Host
		if name := h.headers.applyToRequest(r, replacer(r), &b); name != "" {
			return valuesTooLarge(w, "header "+name)
		}
		if r.Host != host && r.Host != "" {
			// A Host header set by this plugin is the upstream's Host, over
			// the gateway's preserve_host choice (which the service proxy
			// applies after the plugin chain).
			replacer(r).Set(gwctx.UpstreamHostKey, r.Host)
		}
	}
	if len(h.RemoveQuery) > 0 || len(h.query) > 0 {
		repl := replacer(r)
		q := r.URL.Query()
		for _, k := range h.RemoveQuery {
			q.Del(k)
		}
		for _, f := range h.query {
			v, ok := b.expand(f, repl)
			if !ok {
				return valuesTooLarge(w, "query parameter "+f.name)
			}
			q.Set(f.name, v)
		}
		r.URL.RawQuery = q.Encode()
		r.RequestURI = r.URL.RequestURI()
	}
	return next.ServeHTTP(w, r)
}

// valuesTooLarge answers a request whose values do not fit in maxExpanded.
func valuesTooLarge(w http.ResponseWriter, what string) error {
	gwctx.WriteError(w, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf(
		"request header fields too large: with this request's values, %s takes the request-transform's values with placeholders past %d bytes", what, maxExpanded))
	return nil
}

// Interface guards
var (
	_ plugins.Plugin = (*RequestTransform)(nil)
)
