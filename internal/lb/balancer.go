// Package lb is the gateway's load balancing: the four algorithms of
// docs/routing.md over a service's target addresses, steered by the health
// registry. The HTTP proxy uses it through the gateway_router package's
// reverse_proxy selection policy, TCP stream routes directly.
package lb

import (
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// HealthSource says whether a service's target may take traffic (the
// process-wide health registry).
type HealthSource interface {
	Healthy(serviceID int64, addr string) bool
}

// Balancer is the gateway's load-balancing decision over the targets of one
// service, shared by the HTTP proxy (Selection) and TCP stream routes: the
// four algorithms of docs/routing.md, weights, and the health registry.
type Balancer struct {
	// Algorithm: round_robin, random, consistent (client IP hash), weighted
	// (smooth weighted round-robin).
	Algorithm string `json:"algorithm,omitempty"`
	// ServiceID keys the health registry.
	ServiceID int64 `json:"service_id,omitempty"`
	// Weights of the targets by dial address (weighted only).
	Weights map[string]int `json:"weights,omitempty"`
	// Health is consulted by Eligible (nil: every target is healthy).
	Health HealthSource `json:"-"`

	counter atomic.Uint64
	mu      sync.Mutex
	current map[string]int // smooth WRR state
}

// Eligible reports whether addr may take traffic: weighted targets need a
// positive weight, and with healthyOnly the health checks must not have
// marked it unhealthy.
func (b *Balancer) Eligible(addr string, healthyOnly bool) bool {
	if b.Algorithm == "weighted" && b.Weights[addr] <= 0 {
		return false
	}
	return !healthyOnly || b.Health == nil || b.Health.Healthy(b.ServiceID, addr)
}

// Pick chooses one of cands (dial addresses, already filtered) and returns
// its index, or -1 when cands is empty.
func (b *Balancer) Pick(cands []string, clientIP string) int {
	if len(cands) == 0 {
		return -1
	}
	switch b.Algorithm {
	case "random":
		return rand.IntN(len(cands))
	case "consistent":
		return hrw(cands, clientIP)
	case "weighted":
		return b.smoothWeighted(cands)
	default:
		return int(b.counter.Add(1)-1) % len(cands)
	}
}

// hrw is rendezvous hashing: each client keeps its target while the set is
// unchanged, and only the clients of a removed target move.
func hrw(cands []string, clientIP string) int {
	best := -1
	var bestScore uint64
	for i, addr := range cands {
		h := fnv.New64a()
		_, _ = h.Write([]byte(clientIP))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(addr))
		if sc := h.Sum64(); best < 0 || sc > bestScore {
			best, bestScore = i, sc
		}
	}
	return best
}

// smoothWeighted is nginx's smooth weighted round-robin: every pick adds
// each candidate's weight to its current value, takes the largest and
// subtracts the total from it, spreading picks evenly over the cycle.
func (b *Balancer) smoothWeighted(cands []string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current == nil {
		b.current = map[string]int{}
	}
	total, best := 0, -1
	for i, addr := range cands {
		w := b.Weights[addr]
		b.current[addr] += w
		total += w
		if best < 0 || b.current[addr] > b.current[cands[best]] {
			best = i
		}
	}
	b.current[cands[best]] -= total
	return best
}
