package traffic

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"golang.org/x/net/http/httpguts"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// CORS is the cors plugin: it answers preflight requests itself (204, never
// proxied) and adds the CORS response headers to requests from allowed
// origins. The gateway's CORS headers replace any the upstream sends.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_cors {
//	    allow_origins https://app.example.com *.example.org
//	    allow_methods GET POST
//	    allow_headers Authorization Content-Type
//	    expose_headers X-Request-ID
//	    allow_credentials
//	    max_age_s 3600
//	}
type CORS struct {
	AllowOrigins     []string `json:"allow_origins" schema:"maxItems=100,maxLength=2048" doc:"Allowed origins: exact (https://app.example.com), * (any) or a wildcard host (*.example.com, optionally with scheme and port: https://*.example.com:8443). Default [\"*\"]."`
	AllowMethods     []string `json:"allow_methods" schema:"maxItems=32,maxLength=32" doc:"Access-Control-Allow-Methods of preflights. Default GET, HEAD, PUT, PATCH, POST, DELETE."`
	AllowHeaders     []string `json:"allow_headers" schema:"header_name,maxItems=100" doc:"Access-Control-Allow-Headers of preflights; empty reflects the preflight's Access-Control-Request-Headers."`
	ExposeHeaders    []string `json:"expose_headers" schema:"header_name,maxItems=100" doc:"Access-Control-Expose-Headers of actual responses."`
	AllowCredentials bool     `json:"allow_credentials" doc:"Send Access-Control-Allow-Credentials: true (the matching origin is then echoed, never *). Not allowed together with the origin * (it would let any site, even the null origin, make credentialed requests): list the origins (wildcard hosts are fine)."`
	MaxAgeS          int      `json:"max_age_s" schema:"min=0,max=86400" doc:"Access-Control-Max-Age of preflights in seconds (0: header not sent). Default 600."`

	origins                []originPattern
	anyOrigin              bool
	methods, allow, expose string
}

// SetDefaults implements schema.Defaulter.
func (h *CORS) SetDefaults() {
	h.AllowOrigins = []string{"*"}
	h.AllowMethods = []string{"GET", "HEAD", "PUT", "PATCH", "POST", "DELETE"}
	h.AllowHeaders = []string{}
	h.ExposeHeaders = []string{}
	h.AllowCredentials = false
	h.MaxAgeS = 600
}

// CaddyModule returns the Caddy module information.
func (*CORS) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[CORS]("cors") }

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate) and compiles the origin patterns and header values.
func (h *CORS) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	h.origins, h.anyOrigin = nil, false
	for i, o := range h.AllowOrigins {
		p, err := parseOriginPattern(o)
		if err != nil {
			return schema.Errorf(idx("allow_origins", i), "%v", err)
		}
		h.anyOrigin = h.anyOrigin || p.any
		h.origins = append(h.origins, p)
	}
	h.methods = strings.Join(h.AllowMethods, ", ")
	h.allow = strings.Join(h.AllowHeaders, ", ")
	h.expose = strings.Join(h.ExposeHeaders, ", ")
	return nil
}

// Validate implements schema.Validator and caddy.Validator.
func (h *CORS) Validate() error {
	for i, o := range h.AllowOrigins {
		p, err := parseOriginPattern(o)
		if err != nil {
			return schema.Errorf(idx("allow_origins", i), "%v", err)
		}
		// As APISIX: "*" with credentials would echo any origin, null
		// included, with Access-Control-Allow-Credentials.
		if p.any && h.AllowCredentials {
			return schema.Errorf("allow_credentials", "must be false when allow_origins contains * (list the allowed origins instead)")
		}
	}
	for i, m := range h.AllowMethods {
		if !httpguts.ValidHeaderFieldName(m) { // a method is an HTTP token
			return schema.Errorf(idx("allow_methods", i), "must be an HTTP method")
		}
	}
	for field, list := range map[string][]string{"allow_headers": h.AllowHeaders, "expose_headers": h.ExposeHeaders} {
		for i, name := range list {
			if name != "*" && !httpguts.ValidHeaderFieldName(name) {
				return schema.Errorf(idx(field, i), "must be a header name or *")
			}
		}
	}
	return nil
}

// ServeHTTP answers preflights and decorates actual responses.
func (h *CORS) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	origin := r.Header.Get("Origin")
	allowOrigin := h.allowOrigin(origin)

	if origin != "" && r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		hdr := w.Header()
		addVary(hdr, "Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers")
		if allowOrigin != "" {
			hdr.Set("Access-Control-Allow-Origin", allowOrigin)
			if h.AllowCredentials {
				hdr.Set("Access-Control-Allow-Credentials", "true")
			}
			if h.methods != "" {
				hdr.Set("Access-Control-Allow-Methods", h.methods)
			}
			allow := h.allow
			if len(h.AllowHeaders) == 0 {
				allow = strings.Join(r.Header.Values("Access-Control-Request-Headers"), ", ")
			}
			if allow != "" {
				hdr.Set("Access-Control-Allow-Headers", allow)
			}
			if h.MaxAgeS > 0 {
				hdr.Set("Access-Control-Max-Age", strconv.Itoa(h.MaxAgeS))
			}
		}
		hdr.Del("Content-Type")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}

	h.decorate(w.Header(), allowOrigin) // for responses made after this handler returns
	// Under the gateway's proxy server: a hook of its writer (nothing
	// allocated).
	if rw, ok := w.(*gwctx.RecordingWriter); ok && rw.OnHeader(h, gwctx.HookArgs{S: allowOrigin}) {
		return next.ServeHTTP(w, r)
	}
	return next.ServeHTTP(newHeaderHook(w, func(hdr http.Header) { h.decorate(hdr, allowOrigin) }), r)
}

// ApplyHeader is the decoration of an actual response as a hook of the
// gateway's writer (gwctx.RecordingWriter.OnHeader); args.S is the
// Access-Control-Allow-Origin value.
func (h *CORS) ApplyHeader(hdr http.Header, args gwctx.HookArgs) { h.decorate(hdr, args.S) }

// decorate sets the CORS headers of an actual response, allowOrigin
// ("" for none) being its Access-Control-Allow-Origin. The gateway owns
// them: the upstream's are removed, whatever the request, so an upstream
// that grants every origin (reflecting Origin, with credentials) grants
// nothing to an origin the plugin does not allow. Every response whose
// grant depends on Origin says Vary: Origin, those to requests without
// one too, so that no cache serves one origin's answer to another
// (Fetch standard, "CORS protocol and HTTP caches").
func (h *CORS) decorate(hdr http.Header, allowOrigin string) {
	if !h.anyOrigin {
		addVary(hdr, "Origin")
	}
	for _, name := range corsResponseHeaders {
		delete(hdr, name)
	}
	if allowOrigin == "" {
		return
	}
	hdr.Set("Access-Control-Allow-Origin", allowOrigin)
	if h.AllowCredentials {
		hdr.Set("Access-Control-Allow-Credentials", "true")
	}
	if h.expose != "" {
		hdr.Set("Access-Control-Expose-Headers", h.expose)
	}
}

// corsResponseHeaders are the CORS headers of actual responses
// (canonical), which only the plugin sets.
var corsResponseHeaders = [...]string{"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Expose-Headers"}

// allowOrigin is the Access-Control-Allow-Origin value for origin, or "".
// Any origin (which never goes with allow_credentials) is *, also for a
// request without Origin: the answer is then the same for every request.
func (h *CORS) allowOrigin(origin string) string {
	if h.anyOrigin {
		return "*"
	}
	if origin == "" {
		return ""
	}
	for _, p := range h.origins {
		if p.match(origin) {
			return origin
		}
	}
	return ""
}

// addVary adds names to the Vary header, once each.
func addVary(hdr http.Header, names ...string) {
	have := map[string]bool{}
	for _, v := range hdr.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			have[strings.ToLower(strings.TrimSpace(f))] = true
		}
	}
	for _, n := range names {
		if !have[strings.ToLower(n)] && !have["*"] {
			hdr.Add("Vary", n)
		}
	}
}

// originPattern is one allow_origins entry.
type originPattern struct {
	any    bool
	exact  string // lowercased origin
	scheme string // wildcard: "" (any) or the scheme
	suffix string // wildcard: ".example.com"
	port   string // wildcard: "" (any) or the port
}

func parseOriginPattern(s string) (originPattern, error) {
	if s == "*" {
		return originPattern{any: true}, nil
	}
	scheme, rest, hasScheme := strings.Cut(s, "://")
	if !hasScheme {
		scheme, rest = "", s
	}
	if strings.HasPrefix(rest, "*.") {
		host, port := rest, ""
		if i := strings.LastIndexByte(rest, ':'); i >= 0 {
			host, port = rest[:i], rest[i+1:]
			if _, err := strconv.ParseUint(port, 10, 16); err != nil {
				return originPattern{}, errBadOrigin
			}
		}
		suffix := strings.ToLower(host[1:])
		if len(suffix) < 2 || strings.ContainsAny(suffix, "*/?#@ ") {
			return originPattern{}, errBadOrigin
		}
		return originPattern{scheme: strings.ToLower(scheme), suffix: suffix, port: port}, nil
	}
	u, err := url.Parse(s)
	if err != nil || !hasScheme || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || strings.Contains(u.Host, "*") {
		return originPattern{}, errBadOrigin
	}
	return originPattern{exact: strings.ToLower(strings.TrimSuffix(s, "/"))}, nil
}

var errBadOrigin = errors.New("must be *, an origin (https://app.example.com) or a wildcard host (*.example.com)")

func (p originPattern) match(origin string) bool {
	switch {
	case p.any:
		return true
	case p.exact != "":
		return strings.EqualFold(origin, p.exact)
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if p.scheme != "" && !strings.EqualFold(u.Scheme, p.scheme) {
		return false
	}
	if p.port != "" && u.Port() != p.port {
		return false
	}
	return strings.HasSuffix(strings.ToLower(u.Hostname()), p.suffix)
}

// Interface guards
var (
	_ plugins.Plugin   = (*CORS)(nil)
	_ gwctx.HeaderHook = (*CORS)(nil)
)
