package traffic

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// ResponseTransform is the response-transform plugin: it changes the
// headers of the response the client receives, when the response header is
// written (so the upstream's headers are there to remove or rename). The
// operations run in the order remove, rename, set, add; values may use the
// request's Caddy placeholders (package placeholders).
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile (map fields
// take one "key value" per line):
//
//	gateway_response_transform {
//	    remove_headers Server X-Powered-*
//	    rename_headers X-Upstream-Time X-Time
//	    set_headers Cache-Control no-store
//	    add_headers X-Served-By gateway
//	}
type ResponseTransform struct {
	HeaderTransform

	headers *headerOps
}

// SetDefaults implements schema.Defaulter.
func (h *ResponseTransform) SetDefaults() { h.HeaderTransform.setDefaults() }

// CaddyModule returns the Caddy module information.
func (*ResponseTransform) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[ResponseTransform]("response-transform")
}

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate) and prepares the header operations.
func (h *ResponseTransform) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	h.headers = h.HeaderTransform.ops()
	return nil
}

// Validate implements schema.Validator and caddy.Validator.
func (h *ResponseTransform) Validate() error {
	return h.HeaderTransform.check()
}

// ServeHTTP calls next with a response writer that transforms the header.
func (h *ResponseTransform) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if h.headers.empty() {
		return next.ServeHTTP(w, r)
	}
	hook := &transformHook{ops: h.headers, repl: replacer(r)}
	hook.ResponseWriter, hook.apply = w, hook
	return next.ServeHTTP(hook, r)
}

// transformHook is a response's header hook and the state it needs, in
// one allocation (with room for the values of up to four headers set
// without placeholders).
type transformHook struct {
	headerHook
	ops  *headerOps
	repl *caddy.Replacer
	vals [4]string
}

func (t *transformHook) applyHeader(hdr http.Header) { t.ops.apply(hdr, t.repl, t.vals[:]) }

// Interface guards
var (
	_ plugins.Plugin = (*ResponseTransform)(nil)
)
