// Package lb is the gateway's load-balancing selection policy for Caddy's
// reverse_proxy: the four algorithms of addendum §3, steered by the
// process-wide health registry (which survives reloads) and by Caddy's
// passive failure counts, and never picking a target twice for one request
// so that `retries` means "other targets".
package lb

import (
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-gateway/gateway/modules/gwctx"
	"github.com/caddy-gateway/gateway/modules/process"
)

func init() {
	caddy.RegisterModule(new(Selection))
}

// Selection picks a target of one gateway service.
type Selection struct {
	// Algorithm: round_robin, random, consistent (client IP hash), weighted
	// (smooth weighted round-robin).
	Algorithm string `json:"algorithm,omitempty"`
	// ServiceID keys the health registry.
	ServiceID int64 `json:"service_id,omitempty"`
	// Weights of the upstreams, by dial address (weighted only).
	Weights map[string]int `json:"weights,omitempty"`

	counter atomic.Uint64
	mu      sync.Mutex
	current map[string]int // smooth WRR state
}

// CaddyModule returns the Caddy module information.
func (*Selection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.gateway",
		New: func() caddy.Module { return new(Selection) },
	}
}

// Provision sets up the policy.
func (s *Selection) Provision(caddy.Context) error {
	s.current = map[string]int{}
	return nil
}

// triedKey is the request variable listing the targets already tried for
// this request: a retry after a connection failure must go elsewhere.
const triedKey = "gateway_lb_tried"

// Select implements reverseproxy.Selector.
func (s *Selection) Select(pool reverseproxy.UpstreamPool, r *http.Request, _ http.ResponseWriter) *reverseproxy.Upstream {
	tried, _ := caddyhttp.GetVar(r.Context(), triedKey).([]*reverseproxy.Upstream)
	// Healthy targets first; when none is, any available one (a target the
	// checks call unhealthy is still better than no answer).
	cands := s.candidates(pool, tried, true)
	if len(cands) == 0 {
		cands = s.candidates(pool, tried, false)
	}
	if len(cands) == 0 {
		return nil
	}
	var up *reverseproxy.Upstream
	switch s.Algorithm {
	case "random":
		up = cands[rand.IntN(len(cands))]
	case "consistent":
		up = hrw(cands, gwctx.ClientIP(r))
	case "weighted":
		up = s.smoothWeighted(cands)
	default:
		up = cands[int(s.counter.Add(1)-1)%len(cands)]
	}
	if up != nil {
		caddyhttp.SetVar(r.Context(), triedKey, append(tried, up))
	}
	return up
}

func (s *Selection) candidates(pool reverseproxy.UpstreamPool, tried []*reverseproxy.Upstream, healthyOnly bool) []*reverseproxy.Upstream {
	out := make([]*reverseproxy.Upstream, 0, len(pool))
outer:
	for _, u := range pool {
		if !u.Available() {
			continue
		}
		if s.Algorithm == "weighted" && s.Weights[u.Dial] <= 0 {
			continue
		}
		if healthyOnly && !process.Health.Healthy(s.ServiceID, u.Dial) {
			continue
		}
		for _, t := range tried {
			if t == u {
				continue outer
			}
		}
		out = append(out, u)
	}
	return out
}

// hrw is rendezvous hashing: each client keeps its target while the set is
// unchanged, and only the clients of a removed target move.
func hrw(cands []*reverseproxy.Upstream, clientIP string) *reverseproxy.Upstream {
	var best *reverseproxy.Upstream
	var bestScore uint64
	for _, u := range cands {
		h := fnv.New64a()
		_, _ = h.Write([]byte(clientIP))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(u.Dial))
		if sc := h.Sum64(); best == nil || sc > bestScore {
			best, bestScore = u, sc
		}
	}
	return best
}

// smoothWeighted is nginx's smooth weighted round-robin: every pick adds
// each candidate's weight to its current value, takes the largest and
// subtracts the total from it, spreading picks evenly over the cycle.
func (s *Selection) smoothWeighted(cands []*reverseproxy.Upstream) *reverseproxy.Upstream {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	var best *reverseproxy.Upstream
	for _, u := range cands {
		w := s.Weights[u.Dial]
		s.current[u.Dial] += w
		total += w
		if best == nil || s.current[u.Dial] > s.current[best.Dial] {
			best = u
		}
	}
	if best != nil {
		s.current[best.Dial] -= total
	}
	return best
}

// Interface guards
var (
	_ caddy.Provisioner     = (*Selection)(nil)
	_ reverseproxy.Selector = (*Selection)(nil)
)
