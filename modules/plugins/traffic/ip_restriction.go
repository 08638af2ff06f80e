package traffic

import (
	"net/http"
	"net/netip"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// IPRestriction is the ip-restriction plugin: it refuses clients by address.
// The client address is the gateway's (trusted_proxies honoured), see
// gwctx.ClientIP.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_ip_restriction {
//	    allow 10.0.0.0/8 192.168.1.7
//	    deny  10.1.0.0/16
//	    status 404
//	    message "not here"
//	}
type IPRestriction struct {
	Allow   []string `json:"allow" schema:"maxItems=10000,maxLength=64" doc:"IPs or CIDRs allowed; when non-empty, every other client is refused."`
	Deny    []string `json:"deny" schema:"maxItems=10000,maxLength=64" doc:"IPs or CIDRs refused; deny wins over allow."`
	Status  int      `json:"status" schema:"min=400,max=599" doc:"Status of the refusal. Default 403."`
	Message string   `json:"message" schema:"maxLength=1024" doc:"Error message of the refusal ({error: message}). Default \"forbidden\"."`

	allow, deny []netip.Prefix
}

// SetDefaults implements schema.Defaulter.
func (h *IPRestriction) SetDefaults() {
	h.Allow = []string{}
	h.Deny = []string{}
	h.Status = http.StatusForbidden
	h.Message = "forbidden"
}

// CaddyModule returns the Caddy module information.
func (*IPRestriction) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[IPRestriction]("ip-restriction")
}

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate) and parses the lists.
func (h *IPRestriction) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	var err error
	if h.allow, err = ParsePrefixes("allow", h.Allow); err != nil {
		return err
	}
	h.deny, err = ParsePrefixes("deny", h.Deny)
	return err
}

// Validate implements schema.Validator and caddy.Validator.
func (h *IPRestriction) Validate() error {
	if len(h.Allow) == 0 && len(h.Deny) == 0 {
		return schema.Errorf("allow", "at least one of allow and deny must be non-empty")
	}
	if _, err := ParsePrefixes("allow", h.Allow); err != nil {
		return err
	}
	_, err := ParsePrefixes("deny", h.Deny)
	return err
}

// ServeHTTP refuses denied clients and calls next for the others. A client
// address that cannot be parsed is refused.
func (h *IPRestriction) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !h.allowed(gwctx.ClientIP(r)) {
		gwctx.WriteError(w, h.Status, h.Message)
		return nil
	}
	return next.ServeHTTP(w, r)
}

func (h *IPRestriction) allowed(ip string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	addr = addr.WithZone("").Unmap()
	if containsAddr(h.deny, addr) {
		return false
	}
	return len(h.allow) == 0 || containsAddr(h.allow, addr)
}

func containsAddr(list []netip.Prefix, addr netip.Addr) bool {
	for _, p := range list {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// ParsePrefixes parses IPs and CIDRs (Caddy's own syntax for remote_ip)
// as the plugin reads its allow and deny lists; errors name field[i].
func ParsePrefixes(field string, list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		p, err := caddyhttp.CIDRExpressionToPrefix(s)
		if err != nil {
			return nil, schema.Errorf(idx(field, i), "must be an IP address or CIDR")
		}
		if p.Addr().Is4In6() {
			bits := p.Bits() - 96
			if bits < 0 {
				bits = 0
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), bits)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// GatesAccess implements plugins.Gate: a proxy-cache never answers
// before it (plugins.Arrange).
func (*IPRestriction) GatesAccess() {}

// Interface guards
var (
	_ plugins.Plugin = (*IPRestriction)(nil)
	_ plugins.Gate   = (*IPRestriction)(nil)
)
