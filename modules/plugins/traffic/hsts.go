package traffic

import (
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// HSTS is the hsts plugin: Strict-Transport-Security on responses to HTTPS
// requests (never on plain HTTP, where browsers ignore it). It replaces an
// upstream's own header.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_hsts {
//	    max_age_s 63072000
//	    include_subdomains
//	    preload
//	}
type HSTS struct {
	MaxAgeS           int64 `json:"max_age_s" schema:"min=0,max=315360000" doc:"max-age in seconds (0 tells browsers to forget the host). Default 31536000."`
	IncludeSubdomains bool  `json:"include_subdomains" doc:"Add includeSubDomains."`
	Preload           bool  `json:"preload" doc:"Add preload (submission to browsers' preload lists also wants include_subdomains and a max-age of at least a year)."`

	value string
}

// SetDefaults implements schema.Defaulter.
func (h *HSTS) SetDefaults() {
	h.MaxAgeS = 31536000
	h.IncludeSubdomains = false
	h.Preload = false
}

// CaddyModule returns the Caddy module information.
func (*HSTS) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[HSTS]("hsts") }

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate) and builds the header value.
func (h *HSTS) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	h.value = "max-age=" + strconv.FormatInt(h.MaxAgeS, 10)
	if h.IncludeSubdomains {
		h.value += "; includeSubDomains"
	}
	if h.Preload {
		h.value += "; preload"
	}
	return nil
}

// Validate implements caddy.Validator (the tags say everything).
func (h *HSTS) Validate() error { return nil }

// ServeHTTP adds the header to HTTPS responses.
func (h *HSTS) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.TLS == nil {
		return next.ServeHTTP(w, r)
	}
	set := func(hdr http.Header) { hdr.Set("Strict-Transport-Security", h.value) }
	set(w.Header()) // for responses made after this handler returns
	return next.ServeHTTP(newHeaderHook(w, set), r)
}

// Interface guards
var (
	_ plugins.Plugin = (*HSTS)(nil)
)
