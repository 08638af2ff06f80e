package traffic

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// Redirect is the redirect plugin: plain-HTTP requests to HTTPS (to_https),
// or every request to another place (location).
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_redirect {
//	    to_https
//	    https_port 8443     # when the HTTPS port is not 443
//	}
//	gateway_redirect {
//	    location https://new.example.com
//	    status 301
//	    keep_path false
//	}
type Redirect struct {
	ToHTTPS  bool   `json:"to_https" doc:"Redirect plain-HTTP requests to https://<host>:<HTTPS listener port> (HTTPS requests pass). Exactly one of to_https and location."`
	Location string `json:"location" schema:"url" doc:"Absolute http(s) URL prefix to redirect every request to. Exactly one of to_https and location."`
	Status   int    `json:"status" schema:"enum=301|302|303|307|308" doc:"Redirect status. Default 308."`
	KeepPath bool   `json:"keep_path" doc:"Append the request's path and query (as the client sent them) to the target. Default true."`

	// HTTPSPort is the HTTPS port to_https redirects to when the gateway
	// router did not say (a Caddyfile user's own site); 0 means 443.
	HTTPSPort int `json:"https_port,omitempty" schema:"internal"`
}

// SetDefaults implements schema.Defaulter.
func (h *Redirect) SetDefaults() {
	h.ToHTTPS = false
	h.Location = ""
	h.Status = http.StatusPermanentRedirect
	h.KeepPath = true
}

// CaddyModule returns the Caddy module information.
func (*Redirect) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[Redirect]("redirect") }

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate).
func (h *Redirect) Provision(caddy.Context) error { return schema.Check(h) }

// Validate implements schema.Validator and caddy.Validator.
func (h *Redirect) Validate() error {
	switch {
	case h.ToHTTPS && h.Location != "":
		return schema.Errorf("location", "must be empty when to_https is true (exactly one of to_https and location)")
	case !h.ToHTTPS && h.Location == "":
		return schema.Errorf("location", "is required unless to_https is true (exactly one of to_https and location)")
	case h.Location != "":
		u, err := schema.HTTPURL(h.Location)
		if err != nil {
			return schema.Errorf("location", "%v", err)
		}
		if h.KeepPath && (u.RawQuery != "" || u.ForceQuery) {
			return schema.Errorf("location", "must not have a query when keep_path is true (the request's path and query are appended)")
		}
	}
	if h.HTTPSPort < 0 || h.HTTPSPort > 65535 {
		return schema.Errorf("https_port", "must be a port number")
	}
	return nil
}

// ServeHTTP redirects, or calls next for an HTTPS request under to_https.
func (h *Redirect) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var target string
	if h.ToHTTPS {
		if r.TLS != nil {
			return next.ServeHTTP(w, r)
		}
		target = "https://" + h.httpsHost(r)
		if h.KeepPath {
			target += clientURI(r)
		} else {
			target += "/"
		}
	} else {
		target = h.Location
		if h.KeepPath {
			target = strings.TrimSuffix(target, "/") + clientURI(r)
		}
	}
	w.Header().Set("Location", target)
	w.Header().Del("Content-Type")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(h.Status)
	return nil
}

// httpsHost is the request's host with the HTTPS listener's port (none for 443).
func (h *Redirect) httpsHost(r *http.Request) string {
	port := 0
	if info := gwctx.From(r); info != nil {
		port = info.HTTPSPort
	}
	if port == 0 {
		port = h.HTTPSPort
	}
	host := r.Host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if port == 0 || port == 443 {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// clientURI is the path and query the client sent (before any rewrite or
// strip_path inside the gateway).
func clientURI(r *http.Request) string {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return orig.URL.RequestURI()
	}
	return r.URL.RequestURI()
}

// Interface guards
var (
	_ plugins.Plugin = (*Redirect)(nil)
)
