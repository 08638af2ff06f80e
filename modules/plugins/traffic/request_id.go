package traffic

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/uuid"

	"github.com/caddy-gateway/gateway/modules/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// RequestID is the request-id plugin: every request carries an id in a
// header, sent upstream and (echo_downstream) back to the client. The id is
// also the request record's request_id and the placeholder
// {http.vars.request_id}.
type RequestID struct {
	HeaderName     string `json:"header_name" schema:"header_name,minLength=1" doc:"Header carrying the id, upstream and downstream. Default X-Request-ID."`
	TrustIncoming  bool   `json:"trust_incoming" doc:"Keep an id the client sent (1 to 200 visible ASCII characters) instead of generating one. Default true."`
	EchoDownstream bool   `json:"echo_downstream" doc:"Send the id back to the client in the response header. Default true."`

	header string // canonical HeaderName
}

// SetDefaults implements schema.Defaulter.
func (h *RequestID) SetDefaults() {
	h.HeaderName = "X-Request-ID"
	h.TrustIncoming = true
	h.EchoDownstream = true
}

// CaddyModule returns the Caddy module information.
func (*RequestID) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[RequestID]("request-id") }

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate).
func (h *RequestID) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	h.header = http.CanonicalHeaderKey(h.HeaderName)
	return nil
}

// Validate implements caddy.Validator (the tags say everything; Provision
// checks them).
func (h *RequestID) Validate() error { return nil }

// ServeHTTP assigns the id, then calls next.
func (h *RequestID) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var id string
	if h.TrustIncoming {
		id = r.Header.Get(h.header)
		if !validIncomingID(id) {
			id = ""
		}
	}
	if id == "" {
		id = uuid.NewString()
	}
	r.Header.Set(h.header, id)
	info, r := gwctx.Ensure(r)
	info.RequestID = id
	caddyhttp.SetVar(r.Context(), "request_id", id)
	if h.EchoDownstream {
		// now, for responses made after this handler returns (proxy errors),
		// and again when the response is written, replacing an upstream copy
		w.Header().Set(h.header, id)
		w = newHeaderHook(w, func(hdr http.Header) { hdr.Set(h.header, id) })
	}
	return next.ServeHTTP(w, r)
}

// validIncomingID accepts 1..200 visible ASCII characters: anything else
// (empty, oversized, control characters, spaces) is replaced by a fresh id.
func validIncomingID(id string) bool {
	if id == "" || len(id) > 200 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler. Syntax:
//
//	gateway_request_id {
//	    header_name X-Correlation-ID
//	    trust_incoming false
//	    echo_downstream
//	}
func (h *RequestID) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugins.UnmarshalCaddyfile(d, h, plugins.Syntax{})
}

// Interface guards
var (
	_ plugins.Plugin = (*RequestID)(nil)
)
