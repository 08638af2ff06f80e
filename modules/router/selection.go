package router

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/health"
	"github.com/caddy-gateway/gateway/internal/lb"
)

func init() {
	caddy.RegisterModule(new(Selection))
}

// Selection is the reverse_proxy selection policy of one gateway service:
// healthy targets first (the gateway app's registry survives reloads), never
// the same target twice for one request, so `retries` means "other targets".
type Selection struct {
	lb.Balancer
}

// CaddyModule returns the Caddy module information.
func (*Selection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.gateway",
		New: func() caddy.Module { return new(Selection) },
	}
}

// Provision connects the policy to the health registry of the config's
// gateway app (Caddy lets a module reach an app that is still provisioning:
// the gateway app provisions the router this policy belongs to), or to the
// registry its context carries (health.WithRegistry). Without a
// gateway app (a hand-written config) no target is checked: all are healthy.
func (s *Selection) Provision(ctx caddy.Context) error {
	if reg := health.RegistryFrom(ctx); reg != nil {
		s.Health = reg // a shared proxy (Router's PooledProxies)
		return nil
	}
	app, err := ctx.AppIfConfigured("gateway")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gateway selection policy: %w", err)
	}
	owner, ok := app.(health.Owner)
	if !ok {
		return fmt.Errorf("gateway selection policy: the gateway app is %T, which holds no health registry", app)
	}
	if reg := owner.HealthRegistry(); reg != nil {
		s.Health = reg
	}
	return nil
}

// triedKey is the request variable holding the targets already tried for
// this request (a *reverseproxy.Upstream after the first pick, then a
// slice): a retry after a connection failure must go elsewhere.
const triedKey = "gateway_lb_tried"

// Select implements reverseproxy.Selector.
func (s *Selection) Select(pool reverseproxy.UpstreamPool, r *http.Request, _ http.ResponseWriter) *reverseproxy.Upstream {
	var tried []*reverseproxy.Upstream
	switch t := caddyhttp.GetVar(r.Context(), triedKey).(type) {
	case *reverseproxy.Upstream:
		tried = []*reverseproxy.Upstream{t}
	case []*reverseproxy.Upstream:
		tried = t
	}
	// Candidates and their addresses live on the stack for the usual
	// small pools.
	var candBuf [16]*reverseproxy.Upstream
	var addrBuf [16]string
	// Healthy targets first; when none is, any available one (a target the
	// checks call unhealthy is still better than no answer).
	cands := s.candidates(candBuf[:0], pool, tried, true)
	if len(cands) == 0 {
		cands = s.candidates(candBuf[:0], pool, tried, false)
	}
	addrs := addrBuf[:0]
	for _, u := range cands {
		addrs = append(addrs, u.Dial)
	}
	i := s.Pick(addrs, gwctx.ClientIP(r))
	if i < 0 {
		return nil
	}
	if tried == nil {
		// the first pick of the request: no slice to allocate
		caddyhttp.SetVar(r.Context(), triedKey, cands[i])
	} else {
		caddyhttp.SetVar(r.Context(), triedKey, append(tried, cands[i]))
	}
	return cands[i]
}

func (s *Selection) candidates(out []*reverseproxy.Upstream, pool reverseproxy.UpstreamPool, tried []*reverseproxy.Upstream, healthyOnly bool) []*reverseproxy.Upstream {
	for _, u := range pool {
		if u.Available() && s.Eligible(u.Dial, healthyOnly) && !slices.Contains(tried, u) {
			out = append(out, u)
		}
	}
	return out
}

// Interface guards
var (
	_ caddy.Provisioner     = (*Selection)(nil)
	_ reverseproxy.Selector = (*Selection)(nil)
)
