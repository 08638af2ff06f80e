package traffic

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/placeholders"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// RequestTermination is the request-termination plugin: it answers every
// request itself, never proxying: {error: message} by default, or a raw
// body (placeholders allowed, expanded as Caddy's static_response does)
// with content_type. What the placeholders add to the body is bounded as
// the transforms' values are (maxExpanded): a 1 MiB body may repeat a
// placeholder of a client's header some 40,000 times, which Caddy's
// replacer would build whole.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_request_termination {
//	    status 503
//	    message "down for maintenance"
//	    # or a raw body:
//	    body "<h1>Back soon</h1>"
//	    content_type "text/html; charset=utf-8"
//	}
type RequestTermination struct {
	Status      int     `json:"status" schema:"min=200,max=599" doc:"Response status. Default 503."`
	Message     string  `json:"message" schema:"maxLength=1024" doc:"Error message of the JSON answer {error: message} (when body is null). Default \"service unavailable\"."`
	Body        *string `json:"body" schema:"placeholders,text,maxLength=1048576" doc:"Raw response body instead of {error: message}. Default null. The request's placeholders ({http.request.*} but its body, {http.vars.client_ip}, {http.vars.request_id}, {time.now*}) are replaced; any other ({env.*}, {file.*} …) is 400; other braces (a JSON body) are literal. The expanded body is at most 64 KiB longer than body: a request whose values take it past that is answered 431."`
	ContentType string  `json:"content_type" schema:"header_value,maxLength=255" doc:"Content-Type of a raw body (literal: no placeholders). Default application/json."`
}

// SetDefaults implements schema.Defaulter.
func (h *RequestTermination) SetDefaults() {
	h.Status = http.StatusServiceUnavailable
	h.Message = "service unavailable"
	h.Body = nil
	h.ContentType = "application/json"
}

// CaddyModule returns the Caddy module information.
func (*RequestTermination) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[RequestTermination]("request-termination")
}

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate).
func (h *RequestTermination) Provision(caddy.Context) error { return schema.Check(h) }

// Validate implements schema.Validator and caddy.Validator.
func (h *RequestTermination) Validate() error {
	if h.ContentType != "" {
		if _, _, err := mime.ParseMediaType(h.ContentType); err != nil {
			return schema.Errorf("content_type", "must be a media type")
		}
	}
	return nil
}

// ServeHTTP answers the request.
func (h *RequestTermination) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if h.Body == nil {
		gwctx.WriteError(w, h.Status, h.Message)
		return nil
	}
	body, ok := placeholders.Expand(replacer(r), *h.Body, len(*h.Body)+maxExpanded)
	if !ok {
		gwctx.WriteError(w, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf(
			"request header fields too large: with this request's values, the request-termination body grows past %d bytes more than its %d", maxExpanded, len(*h.Body)))
		return nil
	}
	if h.ContentType != "" { // literal: never expanded
		w.Header().Set("Content-Type", h.ContentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(h.Status)
	_, _ = io.WriteString(w, body) // a client gone, or a status without a body
	return nil
}

// Interface guards
var (
	_ plugins.Plugin = (*RequestTermination)(nil)
)
