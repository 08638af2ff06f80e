package traffic

import (
	"mime"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/modules/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// RequestTermination is the request-termination plugin: it answers every
// request itself, never proxying: {error: message} by default, or a raw
// body (Caddy's static_response, placeholders allowed) with content_type.
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
	Body        *string `json:"body" schema:"placeholders,text,maxLength=1048576" doc:"Raw response body instead of {error: message}. Default null. The request's placeholders ({http.request.*} but its body, {http.vars.client_ip}, {http.vars.request_id}, {time.now*}) are replaced; any other ({env.*}, {file.*} …) is 400; other braces (a JSON body) are literal."`
	ContentType string  `json:"content_type" schema:"header_value,maxLength=255" doc:"Content-Type of a raw body (literal: no placeholders). Default application/json."`

	static *caddyhttp.StaticResponse
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
// only calls Validate) and sets up the static response of a raw body.
func (h *RequestTermination) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	if h.Body != nil {
		h.static = &caddyhttp.StaticResponse{
			StatusCode: caddyhttp.WeakString(strconv.Itoa(h.Status)),
			Body:       *h.Body,
		}
	}
	return nil
}

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
	if h.static == nil {
		gwctx.WriteError(w, h.Status, h.Message)
		return nil
	}
	// Set here rather than in the static response's headers, which Caddy
	// runs through the replacer: the content type is literal.
	if h.ContentType != "" {
		w.Header().Set("Content-Type", h.ContentType)
	}
	return h.static.ServeHTTP(w, r, next)
}

// Interface guards
var (
	_ plugins.Plugin = (*RequestTermination)(nil)
)
