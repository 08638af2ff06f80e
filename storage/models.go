// Package storage holds the gateway's persistent resources (GORM models) and
// the store that opens SQLite or PostgreSQL. Each model is also the
// resource's declaration for the admin API: its json tags are the field
// names, its `schema` tags and Validate the rules, SetDefaults the defaults
// (see package schema).
package storage

import (
	"encoding/json"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/internal/pathexpr"
	"github.com/caddy-gateway/gateway/schema"
)

// Service is an upstream service: where and how to proxy.
type Service struct {
	ID               int64     `json:"id" gorm:"primaryKey" schema:"readonly"`
	Name             string    `json:"name" schema:"required,name,minLength=1"`
	Protocol         string    `json:"protocol" schema:"enum=http|https|grpc|grpcs,extension=grpc|grpcs" doc:"Upstream protocol; default http. Extensions: grpc is HTTP/2 without TLS (h2c) and grpcs HTTP/2 over TLS to the targets, for gRPC servers (docs/grpc.md)."`
	ConnectTimeoutMS int64     `json:"connect_timeout_ms" schema:"min=0,max=3600000" doc:"Dial timeout in milliseconds (at most one hour)."`
	ReadTimeoutMS    int64     `json:"read_timeout_ms" schema:"min=0,max=3600000" doc:"Response header and read timeout in milliseconds (at most one hour). For stream routes: a connection on which neither side sends anything for this long is closed; 0 never closes one."`
	WriteTimeoutMS   int64     `json:"write_timeout_ms" schema:"min=0,max=3600000" doc:"Write timeout in milliseconds (at most one hour). For stream routes: each write to the client or the target must finish within it."`
	Retries          int32     `json:"retries" schema:"min=0,max=100" doc:"How many other targets are tried after a connection failure."`
	LBAlgorithm      string    `json:"lb_algorithm" schema:"enum=round_robin|random|consistent|weighted" doc:"round_robin and random ignore weights; weighted is smooth weighted round-robin; consistent hashes the client IP. Default round_robin."`
	TLSSNI           *string   `json:"tls_sni" schema:"host" doc:"Server name for upstream TLS (https and grpcs services)."`
	HealthPath       *string   `json:"health_path" schema:"path" doc:"HTTP GET health-check path; blank (stored as null) selects TCP connect checks. For grpc and grpcs services: the service name checked with the gRPC health-checking protocol (grpc.health.v1.Health/Check), /pkg.Service for a service or / for the server as a whole."`
	CreatedAt        time.Time `json:"created_at" schema:"readonly"`
	UpdatedAt        time.Time `json:"updated_at" schema:"readonly"`
}

// SetDefaults implements schema.Defaulter.
func (s *Service) SetDefaults() {
	s.Protocol = "http"
	s.ConnectTimeoutMS = 5000
	s.ReadTimeoutMS = 60000
	s.WriteTimeoutMS = 60000
	s.Retries = 1
	s.LBAlgorithm = "round_robin"
}

// Validate implements schema.Validator. A blank health_path is stored as null.
func (s *Service) Validate() error {
	if s.HealthPath != nil && strings.TrimSpace(*s.HealthPath) == "" {
		s.HealthPath = nil
	}
	if s.HealthPath != nil && !strings.HasPrefix(*s.HealthPath, "/") {
		return schema.Errorf("health_path", "must start with /")
	}
	if s.HealthPath != nil && strings.Contains(*s.HealthPath, " ") {
		return schema.Errorf("health_path", "must not contain spaces (percent-encode them)")
	}
	return nil
}

// Target is one upstream address of a service.
type Target struct {
	ID        int64     `json:"id" gorm:"primaryKey" schema:"readonly"`
	ServiceID int64     `json:"service_id" gorm:"index;not null" schema:"readonly"`
	Service   *Service  `json:"-" gorm:"constraint:OnDelete:CASCADE"`
	Host      string    `json:"host" schema:"required,host,minLength=1" doc:"Host name or IP address."`
	Port      int       `json:"port" schema:"required,min=0,max=65535"`
	Weight    int32     `json:"weight" schema:"min=0,max=65535" doc:"Relative weight for the weighted algorithm; 0 takes the target out."`
	Enabled   bool      `json:"enabled"`
	CreatedAt time.Time `json:"created_at" schema:"readonly"`
	UpdatedAt time.Time `json:"updated_at" schema:"readonly"`
}

// SetDefaults implements schema.Defaulter.
func (t *Target) SetDefaults() {
	t.Weight = 100
	t.Enabled = true
}

// Validate implements schema.Validator.
func (t *Target) Validate() error {
	if strings.ContainsAny(t.Host, " /?#@[]") {
		return schema.Errorf("host", "must be a hostname or IP address (an IPv6 address without brackets)")
	}
	// A colon only belongs to an IPv6 address: anything else would make
	// the dial address host:port ambiguous.
	if strings.Contains(t.Host, ":") {
		if _, err := netip.ParseAddr(t.Host); err != nil {
			return schema.Errorf("host", "must be a hostname or IP address (a port goes in port)")
		}
	}
	if err := schema.HostName(t.Host); err != nil {
		return schema.Errorf("host", "%v", err)
	}
	// Proxied clients must never reach the gateway admin API or Caddy's
	// admin endpoint through a target.
	if err := guard.CheckHostPort(t.Host, int(t.Port)); err != nil {
		return schema.Errorf("port", "%v", err)
	}
	// Nor the cloud's instance metadata (credentials) through a public
	// route, unless the settings allow link-local destinations.
	if err := guard.CheckHost(t.Host); err != nil {
		return schema.Errorf("host", "%v", err)
	}
	return nil
}

// Addr is the target's dial address host:port.
func (t *Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// RouteSplit sends a weighted share of a route's traffic to a service.
type RouteSplit struct {
	ServiceID int64 `json:"service_id" schema:"required,min=1"`
	Weight    int32 `json:"weight" schema:"required,min=1,max=65535"`
}

// Route is an HTTP route (docs/routing.md gives its matching semantics).
type Route struct {
	ID           int64             `json:"id" gorm:"primaryKey" schema:"readonly"`
	Name         string            `json:"name" schema:"required,name,minLength=1"`
	ServiceID    int64             `json:"service_id" gorm:"index;not null" schema:"required,min=1"`
	Service      *Service          `json:"-" gorm:"constraint:OnDelete:CASCADE"`
	Priority     int32             `json:"priority" doc:"Higher wins before any other tie-break."`
	Hosts        []string          `json:"hosts" gorm:"serializer:json" schema:"host,maxItems=100" doc:"Exact hosts or wildcard patterns with a leading *. (port and a trailing dot ignored, case-insensitive); an IPv6 address bare or in brackets (::1, [::1])."`
	Paths        []string          `json:"paths" gorm:"serializer:json" schema:"path,maxItems=100" doc:"Literal prefixes starting with / (longest match wins) or ~regex (RE2, anchored at the start of the path; compiling to at most 10000 instructions, where a counted repetition such as x{100} is that many copies of x)."`
	Methods      []string          `json:"methods" gorm:"serializer:json" schema:"maxItems=32,maxLength=32" doc:"Request methods matched (case-insensitive); empty: any method but CONNECT, which only a route listing it proxies (otherwise 405, as a tunnel request to a plain HTTP upstream is never meant by any method; WebSocket over HTTP/2 and HTTP/3, sent as extended CONNECT, is proxied as any WebSocket request)."`
	Headers      map[string]string `json:"headers" gorm:"serializer:json" schema:"keys=header_name,header_value,maxItems=100" doc:"Every listed header must match; names case-insensitive; value * means present."`
	Splits       []RouteSplit      `json:"splits" gorm:"serializer:json" schema:"maxItems=100" doc:"When non-empty, a service is picked per request by weighted random choice, overriding service_id."`
	StripPath    bool              `json:"strip_path" doc:"Remove exactly the matched portion of the path."`
	PreserveHost bool              `json:"preserve_host" doc:"false sends the target's host:port as Host."`
	Enabled      bool              `json:"enabled"`
	CreatedAt    time.Time         `json:"created_at" schema:"readonly"`
	UpdatedAt    time.Time         `json:"updated_at" schema:"readonly"`
}

// SetDefaults implements schema.Defaulter.
func (r *Route) SetDefaults() {
	r.Hosts = []string{}
	r.Paths = []string{}
	r.Methods = []string{}
	r.Headers = map[string]string{}
	r.Splits = []RouteSplit{}
	r.Enabled = true
}

var methodRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Validate implements schema.Validator. Nil collections (JSON null) become
// empty ones.
func (r *Route) Validate() error {
	if r.Hosts == nil {
		r.Hosts = []string{}
	}
	if r.Paths == nil {
		r.Paths = []string{}
	}
	if r.Methods == nil {
		r.Methods = []string{}
	}
	if r.Headers == nil {
		r.Headers = map[string]string{}
	}
	if r.Splits == nil {
		r.Splits = []RouteSplit{}
	}
	for i, h := range r.Hosts {
		if err := ValidateHostPattern(h); err != nil {
			return schema.Errorf("hosts["+strconv.Itoa(i)+"]", "%s", err.Error())
		}
	}
	for i, p := range r.Paths {
		if err := ValidatePathPattern(p); err != nil {
			return schema.Errorf("paths["+strconv.Itoa(i)+"]", "%s", err.Error())
		}
	}
	for i, m := range r.Methods {
		if !methodRe.MatchString(m) {
			return schema.Errorf("methods["+strconv.Itoa(i)+"]", "must be an HTTP method")
		}
	}
	for name := range r.Headers {
		if !methodRe.MatchString(name) {
			return schema.Errorf("headers", "%q is not a valid header name", name)
		}
	}
	return nil
}

// ValidateHostPattern checks an exact host or a "*.suffix" wildcard.
func ValidateHostPattern(h string) error {
	if h == "" {
		return errString("must not be empty")
	}
	rest := h
	if strings.HasPrefix(h, "*.") {
		rest = h[2:]
	}
	if rest == "" || strings.Contains(rest, "*") {
		return errString("must be an exact host or a wildcard with a leading *.")
	}
	if rest == h {
		// An IPv6 literal, bare ("::1") or in brackets as in a Host header
		// ("[::1]"): the router compares hosts without brackets or port.
		lit := h
		if inner, ok := strings.CutPrefix(h, "["); ok {
			lit, _ = strings.CutSuffix(inner, "]")
		}
		if a, err := netip.ParseAddr(lit); err == nil && a.Is6() && a.Zone() == "" && (lit == h || len(lit) == len(h)-2) {
			return nil
		}
	}
	if strings.ContainsAny(rest, " /:?#@") {
		return errString("must be a host name or IP address without scheme, port or path")
	}
	return nil
}

// ValidatePathPattern checks a literal prefix ("/…") or "~regex" with the
// router's own rules (package pathexpr), so that a path the API accepts is
// one the router loads.
func ValidatePathPattern(p string) error { return pathexpr.Validate(p) }

type errString string

func (e errString) Error() string { return string(e) }

// StreamRoute is a raw TCP route: connections on listen_addr go to a service.
type StreamRoute struct {
	ID         int64     `json:"id" gorm:"primaryKey" schema:"readonly"`
	Name       string    `json:"name" schema:"required,name,minLength=1"`
	ListenAddr string    `json:"listen_addr" gorm:"uniqueIndex" schema:"required,host" doc:"IP:port or :port (all interfaces), port 1..65535; a literal IP address, not a host name (use 127.0.0.1, not localhost). Must not collide with the admin listener, the proxy listeners, Caddy's admin endpoint or another stream route. Binds at process start."`
	ServiceID  int64     `json:"service_id" gorm:"index;not null" schema:"required,min=1"`
	Service    *Service  `json:"-" gorm:"constraint:OnDelete:CASCADE"`
	Enabled    bool      `json:"enabled"`
	CreatedAt  time.Time `json:"created_at" schema:"readonly"`
	UpdatedAt  time.Time `json:"updated_at" schema:"readonly"`
}

// SetDefaults implements schema.Defaulter.
func (s *StreamRoute) SetDefaults() { s.Enabled = true }

// Validate implements schema.Validator: listen_addr is a literal address
// (collisions with the gateway's other listeners are checked by the API,
// which knows them).
func (s *StreamRoute) Validate() error {
	if _, _, err := ParseListenAddr(s.ListenAddr); err != nil {
		return schema.Errorf("listen_addr", "%s", err.Error())
	}
	return nil
}

// ParseListenAddr parses a stream listener address: "IP:port", "[IPv6]:port"
// or ":port" (all interfaces), port 1..65535. Host names (localhost too)
// are refused: they bind at most one of their addresses, and which one
// depends on the resolver. ip is nil for all interfaces.
func ParseListenAddr(addr string) (ip net.IP, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, errString("must be IP:port or :port")
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != p {
		return nil, 0, errString("port must be a number 1..65535")
	}
	if host == "" {
		return nil, port, nil
	}
	ip = net.ParseIP(host)
	if ip == nil || strings.Contains(host, "%") {
		return nil, 0, errString("host must be a literal IP address or empty (all interfaces), not a host name")
	}
	if ip.IsUnspecified() {
		ip = nil
	}
	return ip, port, nil
}

// ListenersCollide tells whether two TCP listener addresses (host:port, a
// host may be empty, an IP or a name) would compete for the same port:
// same port, and the same host, or either binds all interfaces. "localhost"
// counts as every loopback address; an unparsable address or port 0 (a
// random port) never collides.
func ListenersCollide(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return false
	}
	na, errA := strconv.Atoi(pa)
	nb, errB := strconv.Atoi(pb)
	if errA != nil || errB != nil || na == 0 || na != nb {
		return false
	}
	wild := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || h == "*" || (ip != nil && ip.IsUnspecified())
	}
	if wild(ha) || wild(hb) {
		return true
	}
	loop := func(h string) bool {
		ip := net.ParseIP(h)
		return strings.EqualFold(h, "localhost") || (ip != nil && ip.IsLoopback())
	}
	if strings.EqualFold(ha, "localhost") || strings.EqualFold(hb, "localhost") {
		return loop(ha) && loop(hb)
	}
	ia, ib := net.ParseIP(ha), net.ParseIP(hb)
	if ia != nil && ib != nil {
		return ia.Equal(ib)
	}
	return strings.EqualFold(ha, hb)
}

// Plugin is a configured instance of a plugin type, scoped globally, to a
// service or to a route. Its config is validated by the type's declaration
// (package plugins).
type Plugin struct {
	ID        int64           `json:"id" gorm:"primaryKey" schema:"readonly"`
	Type      string          `json:"type" gorm:"index" schema:"required,enum=@plugin-type"`
	Scope     string          `json:"scope" schema:"required,enum=global|service|route"`
	ServiceID *int64          `json:"service_id" gorm:"index" doc:"Required for scope service, null otherwise."`
	Service   *Service        `json:"-" gorm:"constraint:OnDelete:CASCADE"`
	RouteID   *int64          `json:"route_id" gorm:"index" doc:"Required for scope route, null otherwise."`
	Route     *Route          `json:"-" gorm:"constraint:OnDelete:CASCADE"`
	Ordering  *int32          `json:"ordering" schema:"notnull" doc:"Plugins run in ascending ordering, then id; default: the type's default ordering. A proxy-cache never runs before the access plugins (auth types, acl, ip-restriction) of its chain, whatever the orderings."`
	Enabled   bool            `json:"enabled"`
	Config    json.RawMessage `json:"config" gorm:"serializer:json;type:text" doc:"Per-type configuration; answers show every field with defaults filled."`
	CreatedAt time.Time       `json:"created_at" schema:"readonly"`
	UpdatedAt time.Time       `json:"updated_at" schema:"readonly"`
}

// SetDefaults implements schema.Defaulter.
func (p *Plugin) SetDefaults() { p.Enabled = true }

// Validate implements schema.Validator (scope rules; the config is checked
// by the plugin type's declaration in the API layer).
func (p *Plugin) Validate() error {
	switch p.Scope {
	case "global":
		if p.ServiceID != nil {
			return schema.Errorf("service_id", "must be null for scope global")
		}
		if p.RouteID != nil {
			return schema.Errorf("route_id", "must be null for scope global")
		}
	case "service":
		if p.ServiceID == nil {
			return schema.Errorf("service_id", "is required for scope service")
		}
		if p.RouteID != nil {
			return schema.Errorf("route_id", "must be null for scope service")
		}
	case "route":
		if p.RouteID == nil {
			return schema.Errorf("route_id", "is required for scope route")
		}
		if p.ServiceID != nil {
			return schema.Errorf("service_id", "must be null for scope route")
		}
	}
	return nil
}

// Consumer is an authenticated identity that can belong to ACL groups.
type Consumer struct {
	ID        int64     `json:"id" gorm:"primaryKey" schema:"readonly"`
	Username  string    `json:"username" gorm:"uniqueIndex" schema:"required,name,minLength=1,maxLength=128" doc:"Sent upstream as X-Consumer-Username."`
	CustomID  *string   `json:"custom_id" gorm:"uniqueIndex" schema:"name,maxLength=255" doc:"Sent upstream as X-Consumer-Custom-ID."`
	Groups    []string  `json:"groups" gorm:"serializer:json" schema:"name,maxItems=100" doc:"ACL groups (no commas: upstream gets them comma-separated in X-Consumer-Groups)."`
	CreatedAt time.Time `json:"created_at" schema:"readonly"`
	UpdatedAt time.Time `json:"updated_at" schema:"readonly"`
}

// SetDefaults implements schema.Defaulter.
func (c *Consumer) SetDefaults() { c.Groups = []string{} }

// Validate implements schema.Validator.
func (c *Consumer) Validate() error {
	if c.Groups == nil {
		c.Groups = []string{}
	}
	for i, g := range c.Groups {
		if g == "" {
			return schema.Errorf("groups["+strconv.Itoa(i)+"]", "must not be empty")
		}
		if strings.Contains(g, ",") {
			return schema.Errorf("groups["+strconv.Itoa(i)+"]", "must not contain commas")
		}
	}
	return nil
}

// Settings is the single row of global settings (id 1).
type Settings struct {
	ID                         int64     `json:"-" gorm:"primaryKey"`
	HTTPListen                 string    `json:"http_listen" schema:"host" doc:"Proxy HTTP listener host:port, or empty to disable; default from the Caddyfile, else :8080."`
	HTTPSListen                string    `json:"https_listen" schema:"host" doc:"Proxy HTTPS listener host:port; default from the Caddyfile, else :8443."`
	HTTPSEnabled               bool      `json:"https_enabled" doc:"Default false; https_listen binds only while true."`
	PublicURL                  string    `json:"public_url" schema:"url" doc:"External URL of the admin UI, or empty (the default); https makes the session cookie Secure; SSO redirect_uri is built from it."`
	ACMEEmail                  string    `json:"acme_email" schema:"format=email,maxLength=254" doc:"Contact e-mail of the ACME account, or empty."`
	ACMEDirectoryURL           string    `json:"acme_directory_url" doc:"ACME directory: an https URL, or an alias: letsencrypt, letsencrypt-staging, zerossl, google, google-staging. Default (also when empty) letsencrypt."`
	TrustedProxies             []string  `json:"trusted_proxies" gorm:"serializer:json" schema:"maxLength=64" doc:"CIDRs or IPs of peers whose X-Forwarded-For decides the client IP. Default []."`
	AllowLinkLocalDestinations bool      `json:"allow_link_local_destinations" doc:"Extension. Default false: service targets, http-log endpoints, the applications' upstream probe and SSO providers refuse link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, and their IPv4-mapped and NAT64 spellings): a literal one with 400 naming the field, a name resolving to one when it is dialled (a proxied request answers 502). True allows them (a target on a link-local network)."`
	H2C                        bool      `json:"h2c" gorm:"column:h2c" doc:"Extension: the HTTP proxy listener also serves cleartext HTTP/2 with prior knowledge (h2c), as gRPC clients without TLS speak it. Default false."`
	HTTP3                      bool      `json:"http3" gorm:"column:http3;default:true" doc:"Extension: the HTTPS proxy listener also serves HTTP/3 (QUIC, UDP on the same port) and advertises it with Alt-Svc. Default true, as in Caddy."`
	UpdatedAt                  time.Time `json:"updated_at" schema:"readonly"`
}

// NewSettings is the settings row with every default: the proxy listeners
// given (the Caddyfile's, whose own defaults are :8080 and :8443), the rest
// declared here. A fresh store is seeded with it, and PUT /api/v1/settings
// and the import start from it (a full replacement resets omitted fields).
func NewSettings(httpListen, httpsListen string) *Settings {
	return &Settings{ID: 1, HTTPListen: httpListen, HTTPSListen: httpsListen, ACMEDirectoryURL: "letsencrypt", TrustedProxies: []string{}, HTTP3: true}
}

// Validate implements schema.Validator.
func (s *Settings) Validate() error {
	if s.TrustedProxies == nil {
		s.TrustedProxies = []string{}
	}
	if s.HTTPListen != "" {
		if err := validListen(s.HTTPListen); err != nil {
			return schema.Errorf("http_listen", "%s", err.Error())
		}
	}
	if err := validListen(s.HTTPSListen); err != nil {
		return schema.Errorf("https_listen", "%s", err.Error())
	}
	if s.HTTPListen != "" && s.HTTPSEnabled && s.HTTPListen == s.HTTPSListen {
		return schema.Errorf("https_listen", "must differ from http_listen")
	}
	if s.ACMEEmail != "" {
		local, domain, ok := strings.Cut(s.ACMEEmail, "@")
		if !ok || local == "" || domain == "" || strings.ContainsAny(s.ACMEEmail, " ,;<>\"") || strings.Contains(domain, "@") {
			return schema.Errorf("acme_email", "must be an e-mail address")
		}
	}
	if s.ACMEDirectoryURL == "" {
		s.ACMEDirectoryURL = "letsencrypt"
	}
	if err := CheckACMEDirectory(s.ACMEDirectoryURL); err != nil {
		return schema.Errorf("acme_directory_url", "%v", err)
	}
	for i, p := range s.TrustedProxies {
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			return schema.Errorf("trusted_proxies["+strconv.Itoa(i)+"]", "must be an IP or CIDR")
		}
	}
	return nil
}

// ListenPort is the port of a host:port listener address, 0 when it has
// none (or it does not parse).
func ListenPort(addr string) int {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

func validListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errString("must be host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errString("port must be 0..65535")
	}
	return nil
}

// ACMEDirectoryAliases maps directory aliases to their URLs.
var ACMEDirectoryAliases = map[string]string{
	"letsencrypt":         "https://acme-v02.api.letsencrypt.org/directory",
	"letsencrypt-staging": "https://acme-staging-v02.api.letsencrypt.org/directory",
	"zerossl":             "https://acme.zerossl.com/v2/DV90",
	"google":              "https://dv.acme-v02.api.pki.goog/directory",
	"google-staging":      "https://dv.acme-v02.test-api.pki.goog/directory",
}
