// Package shared holds the rate-limit plugin's shared counters: the
// sliding windows of the redis and cluster policies, kept in Redis or in
// the PostgreSQL store every gateway node uses, so that a limit holds
// across the nodes. Each take is one server-side step (a Lua script, a
// PL/pgSQL function) on the store's clock, so concurrent nodes never
// double-count.
//
// The connections are the process's, not a config's: the gateway app
// configures them at every load (ConfigureRedis, ConfigurePostgres) and a
// connection whose settings did not change is kept, with its state,
// across reloads.
package shared

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Timeout bounds one take on Redis, PostgresTimeout one on PostgreSQL (a
// transaction taking a row lock, on the store the admin API also writes):
// a store that has not answered by then counts as unreachable for the
// request (docs/plugins.md).
const (
	Timeout         = 100 * time.Millisecond
	PostgresTimeout = 250 * time.Millisecond
)

// probeInterval is how often a configured store is probed: its state is
// visible without traffic, and a store found unreachable is retried by the
// probe, not by every request, until it answers again.
const probeInterval = 500 * time.Millisecond

// ErrUnavailable is a take on a store that is not configured or is known
// to be unreachable.
var ErrUnavailable = errors.New("shared rate-limit store unreachable")

// Counts are a key's fixed windows after a take, on the store's clock.
type Counts struct {
	Allowed    bool
	Prev, Curr int64
	Now        time.Time
}

// Store is a shared counter store.
type Store interface {
	// Take counts the request on key against limit per window: one hit
	// when it is under the limit (check), or n hits unconditionally (a
	// node's batch, see Syncer).
	Take(ctx context.Context, key string, limit int64, window time.Duration, n int64, check bool) (Counts, error)
	// Up reports whether the store answered its last take or probe.
	Up() bool
}

// health is a store's reachability: known down after a failed take until a
// probe succeeds, so that requests do not each wait for a dead store.
type health struct {
	up        atomic.Bool
	mu        sync.Mutex
	lastError string
	checkedAt time.Time
}

func (h *health) set(err error) {
	h.up.Store(err == nil)
	h.mu.Lock()
	h.checkedAt = time.Now().UTC()
	if err != nil {
		h.lastError = err.Error()
	}
	h.mu.Unlock()
}

// fill copies the state into st.
func (h *health) fill(st *Status) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st.Up, st.LastError = h.up.Load(), h.lastError
	if !h.checkedAt.IsZero() {
		at := h.checkedAt
		st.CheckedAt = &at
	}
}

// probeLoop probes until stop is closed.
func probeLoop(h *health, stop <-chan struct{}, probe func(context.Context) error) {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 4*Timeout)
		h.set(probe(ctx))
		cancel()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// Fallbacks counts, per policy, the requests counted locally because the
// policy's store was unreachable (the fault_tolerant fallback).
var fallbacks struct {
	redis, cluster atomic.Int64
	mu             sync.Mutex
	lastLog        map[string]time.Time
}

// Fallbacks is the number of requests of policy ("redis" or "cluster")
// counted locally since the process started.
func Fallbacks(policy string) int64 {
	switch policy {
	case "redis":
		return fallbacks.redis.Load()
	case "cluster":
		return fallbacks.cluster.Load()
	}
	return 0
}

// NoteFallback counts a request of policy that was counted locally (or
// refused, counted is false) because its store failed with err, and logs
// it at most once a minute per policy.
func NoteFallback(logger *zap.Logger, policy string, counted bool, err error) {
	if counted {
		switch policy {
		case "redis":
			fallbacks.redis.Add(1)
		case "cluster":
			fallbacks.cluster.Add(1)
		}
	}
	now := time.Now()
	fallbacks.mu.Lock()
	if fallbacks.lastLog == nil {
		fallbacks.lastLog = map[string]time.Time{}
	}
	last := fallbacks.lastLog[policy]
	due := now.Sub(last) >= time.Minute
	if due {
		fallbacks.lastLog[policy] = now
	}
	fallbacks.mu.Unlock()
	if !due || logger == nil {
		return
	}
	if counted {
		logger.Warn("rate-limit store unreachable: counting on this node until it answers (logged once a minute)",
			zap.String("policy", policy), zap.Error(err))
	} else {
		logger.Error("rate-limit store unreachable: answering 503 where fault_tolerant is false (logged once a minute)",
			zap.String("policy", policy), zap.Error(err))
	}
}
