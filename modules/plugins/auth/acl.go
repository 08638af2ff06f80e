package auth

import (
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// ACL is the acl plugin: it admits the authenticated consumer by its groups
// (allow: member of at least one listed group; deny: member of none). It
// runs after an auth plugin; without an authenticated consumer it answers 403.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_acl {
//	    allow <group...>    # or: deny <group...>
//	    hide_groups_header [true|false]
//	}
type ACL struct {
	Allow            []string `json:"allow" schema:"name,minLength=1" doc:"Groups admitted (exactly one of allow and deny is non-empty)."`
	Deny             []string `json:"deny" schema:"name,minLength=1" doc:"Groups refused (exactly one of allow and deny is non-empty)."`
	HideGroupsHeader bool     `json:"hide_groups_header" doc:"Remove X-Consumer-Groups from the upstream request."`
}

// CaddyModule returns the Caddy module information.
func (*ACL) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[ACL]("acl") }

// Provision implements caddy.Provisioner.
func (a *ACL) Provision(caddy.Context) error { return schema.Check(a) }

// Validate implements caddy.Validator and schema.Validator.
func (a *ACL) Validate() error {
	if (len(a.Allow) == 0) == (len(a.Deny) == 0) {
		return schema.Errorf("allow", "exactly one of allow and deny must be non-empty")
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (a *ACL) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info, r := gwctx.Ensure(r)
	c := info.Consumer
	if c == nil || !a.admits(c.Groups) {
		gwctx.WriteError(w, http.StatusForbidden, "you cannot consume this service")
		return nil
	}
	if a.HideGroupsHeader {
		r.Header.Del(consumers.HeaderGroups)
	}
	return next.ServeHTTP(w, r)
}

func (a *ACL) admits(groups []string) bool {
	member := func(list []string) bool {
		for _, g := range groups {
			if slices.Contains(list, g) {
				return true
			}
		}
		return false
	}
	if len(a.Allow) > 0 {
		return member(a.Allow)
	}
	return !member(a.Deny)
}

// SetDefaults implements schema.Defaulter.
func (a *ACL) SetDefaults() {
	a.Allow = []string{}
	a.Deny = []string{}
	a.HideGroupsHeader = false
}

// GatesAccess implements plugins.Gate: a proxy-cache never answers
// before it (plugins.Arrange).
func (*ACL) GatesAccess() {}

// Interface guards
var (
	_ plugins.Plugin = (*ACL)(nil)
	_ plugins.Gate   = (*ACL)(nil)
)
