package apps

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/schema"
)

// ApplicationSpec is the input of POST /api/v1/applications: one domain
// proxied to one upstream origin, with optional HTTPS redirect, HSTS and
// client IP restriction.
type ApplicationSpec struct {
	Name         string   `json:"name" schema:"required,name,minLength=1,maxLength=100" doc:"Name of the created service and route."`
	Domain       string   `json:"domain" schema:"required,host,minLength=1,maxLength=253" doc:"Exact DNS hostname (no scheme, path, port or wildcard, not an IP address). 400 when it exactly equals (case-insensitively) a host of an existing route."`
	UpstreamURL  string   `json:"upstream_url" schema:"required,minLength=1" doc:"HTTP or HTTPS origin, e.g. http://10.0.0.5:8080 or https://[2001:db8::1]: no credentials, no path other than /, no query, no fragment. The port defaults to 80 / 443. Never the gateway admin API or Caddy's admin endpoint, nor a link-local or cloud metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200) unless settings allow_link_local_destinations is true (400; the probe refuses a name resolving there too)."`
	HTTPS        bool     `json:"https" doc:"Redirect plain HTTP to HTTPS with status 308 (a route-scoped redirect plugin). Requires settings.https_enabled and an issued certificate matching the domain. Default false."`
	HSTS         bool     `json:"hsts" doc:"Strict-Transport-Security for one year, no subdomains, no preload (a route-scoped hsts plugin). Requires https. Default false."`
	AllowedCIDRs []string `json:"allowed_cidrs" schema:"maxItems=100,maxLength=64" doc:"Allowed client IPs or CIDRs (a route-scoped ip-restriction plugin, into which an enabled global ip-restriction is folded so that it still applies); empty (the default) adds no restriction."`

	upstream upstream // parsed UpstreamURL (set by Validate)
}

// SetDefaults implements schema.Defaulter.
func (s *ApplicationSpec) SetDefaults() {
	s.HTTPS = false
	s.HSTS = false
	s.AllowedCIDRs = []string{}
}

// Validate implements schema.Validator.
func (s *ApplicationSpec) Validate() error {
	if s.AllowedCIDRs == nil {
		s.AllowedCIDRs = []string{}
	}
	if err := validateDomain(s.Domain); err != nil {
		return schema.Errorf("domain", "%s", err.Error())
	}
	u, err := parseOutboundUpstream(s.UpstreamURL)
	if err != nil {
		return schema.Errorf("upstream_url", "%s", err.Error())
	}
	s.upstream = u
	if s.HSTS && !s.HTTPS {
		return schema.Errorf("hsts", "requires https")
	}
	for i, c := range s.AllowedCIDRs {
		// The ip-restriction plugin's own parser: what passes here passes
		// the plugin's config validation.
		if _, err := caddyhttp.CIDRExpressionToPrefix(c); err != nil {
			return schema.Errorf("allowed_cidrs["+strconv.Itoa(i)+"]", "must be an IP address or CIDR")
		}
	}
	return nil
}

// UpstreamTest is the input of POST /api/v1/applications/test-upstream.
type UpstreamTest struct {
	UpstreamURL string `json:"upstream_url" schema:"required,minLength=1" doc:"HTTP or HTTPS origin, validated as ApplicationSpec.upstream_url."`

	upstream upstream
}

// Validate implements schema.Validator.
func (s *UpstreamTest) Validate() error {
	u, err := parseOutboundUpstream(s.UpstreamURL)
	if err != nil {
		return schema.Errorf("upstream_url", "%s", err.Error())
	}
	s.upstream = u
	return nil
}

// ApplicationCreated is the answer of POST /api/v1/applications.
type ApplicationCreated struct {
	Name      string  `json:"name"`
	URL       string  `json:"url" doc:"https://<domain> when https is true, else http://<domain>, with :<port> when the listener's port is not 443 / 80."`
	ServiceID int64   `json:"service_id" schema:"min=1"`
	TargetID  int64   `json:"target_id" schema:"min=1"`
	RouteID   int64   `json:"route_id" schema:"min=1"`
	PluginIDs []int64 `json:"plugin_ids" schema:"min=1" doc:"The created route-scoped plugins, in this order as requested: redirect, hsts, ip-restriction."`
}

// UpstreamProbe is the answer of POST /api/v1/applications/test-upstream.
type UpstreamProbe struct {
	Reachable bool   `json:"reachable" doc:"true when the upstream answered with any HTTP status."`
	Status    *int   `json:"status" doc:"The upstream's HTTP status (a redirect is not followed); null when it was not reached."`
	LatencyMS int64  `json:"latency_ms" schema:"min=0" doc:"Time until the response headers (or the failure), in milliseconds."`
	Message   string `json:"message" doc:"What happened, for people."`
}

// upstream is a validated upstream origin.
type upstream struct {
	Scheme string // http or https
	Host   string // hostname or IP address (IPv6 without brackets)
	Port   int
	IsIP   bool
}

// Origin is the URL the probe requests: scheme://host:port/.
func (u upstream) Origin() string {
	return u.Scheme + "://" + net.JoinHostPort(u.Host, strconv.Itoa(u.Port)) + "/"
}

type errString string

func (e errString) Error() string { return string(e) }

// validateDomain checks an exact DNS hostname: dot-separated labels of
// letters, digits and hyphens (1..63 characters, no leading or trailing
// hyphen), at most 253 characters, the last label not all digits (so no IP
// address), without scheme, path, port, wildcard or trailing dot.
func validateDomain(d string) error {
	switch {
	case d == "":
		return errString("must not be empty")
	case strings.Contains(d, "://"):
		return errString("must be a hostname without scheme")
	case strings.ContainsAny(d, "/?#"):
		return errString("must be a hostname without path")
	case strings.Contains(d, "*"):
		return errString("must be an exact hostname, not a wildcard")
	}
	if _, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
		return errString("must be a DNS hostname, not an IP address")
	}
	if strings.Contains(d, ":") {
		return errString("must be a hostname without port")
	}
	return validateHostname(d)
}

// validateHostname checks the DNS hostname rules of validateDomain (d is
// not an IP address: the callers took those first): schema.HostName's,
// stricter in that labels hold ASCII letters, digits and hyphens only,
// none at a label's edge, and there is no trailing dot.
func validateHostname(d string) error {
	if strings.HasSuffix(d, ".") {
		return errString("must be a DNS hostname without a trailing dot")
	}
	if err := schema.HostName(d); err != nil {
		return err
	}
	for l := range strings.SplitSeq(d, ".") {
		if l[0] == '-' || l[len(l)-1] == '-' {
			return errString("must be a DNS hostname (a label starts or ends with a hyphen)")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return errString("must be a DNS hostname (letters, digits, hyphens and dots only)")
			}
		}
	}
	return nil
}

// parseUpstream validates an upstream origin URL.
func parseUpstream(s string) (upstream, error) {
	var u upstream
	if s == "" {
		return u, errString("must not be empty")
	}
	// the URL rule of every URL field (scheme, host, port range, no
	// fragment), then an origin's own: nothing but scheme, host and port
	p, err := schema.HTTPURL(s)
	if err != nil {
		return u, err
	}
	if p.User != nil {
		return u, errString("must not contain credentials")
	}
	if ep := p.EscapedPath(); ep != "" && ep != "/" {
		return u, errString("must not have a path other than /")
	}
	if p.RawQuery != "" || p.ForceQuery {
		return u, errString("must not have a query")
	}
	u.Scheme = p.Scheme
	u.Port = 80
	if p.Scheme == "https" {
		u.Port = 443
	}
	if ps := p.Port(); ps != "" {
		u.Port, _ = strconv.Atoi(ps) // HTTPURL checked it
	} else if strings.HasSuffix(p.Host, ":") {
		return u, errString("must not have an empty port")
	}
	host := p.Hostname()
	if strings.HasPrefix(p.Host, "[") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return u, errString("must have a valid IPv6 address in brackets")
		}
		u.Host, u.IsIP = host, true
		return u, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return u, errString("IPv6 hosts must be in brackets")
		}
		u.Host, u.IsIP = host, true
		return u, nil
	}
	if err := validateHostname(host); err != nil {
		return u, errString("host " + err.Error())
	}
	u.Host = host
	return u, nil
}

// parseOutboundUpstream is parseUpstream, refusing the process's own
// control endpoints and link-local or cloud metadata addresses (the probe
// dials this address, targets proxy to it).
func parseOutboundUpstream(s string) (upstream, error) {
	u, err := parseUpstream(s)
	if err != nil {
		return u, err
	}
	if err := guard.CheckHostPort(u.Host, u.Port); err != nil {
		return u, errString(err.Error())
	}
	if err := guard.CheckHost(u.Host); err != nil {
		return u, errString("host " + err.Error())
	}
	return u, nil
}
