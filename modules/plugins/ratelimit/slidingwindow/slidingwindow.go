// Package slidingwindow is the rate-limit plugin's counter store: a sliding
// window approximated by two fixed windows (the current one and the previous
// one, weighted by how much of it still overlaps the sliding window), kept
// per key in memory. Memory is bounded: idle keys are swept, and the number
// of keys is capped. At the cap a new key takes the place of the least used
// counter (its share of its limit) of a random sample, so a client spraying
// fresh keys mostly evicts its own one-request counters: resetting another
// client's exhausted counter would take as many requests per sprayed key as
// that client made.
//
// The plugin's instances share a Store held in a usage pool beside the
// plugin (ratelimit/state.go), so counters survive config reloads.
package slidingwindow

import (
	"math"
	"sync"
	"time"
	"unsafe"
)

// DefaultMaxKeys is the key cap of a store made with NewStore(0).
const DefaultMaxKeys = 1 << 18

const (
	numShards   = 64
	sampleSize  = 8
	sweepPeriod = 30 * time.Second
)

// Store holds counters. Safe for concurrent use.
type Store struct {
	shards      [numShards]shard
	perShardMax int
	now         func() time.Time
	janitor     sync.Once
}

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	window   time.Duration // length of the fixed windows
	idx      int64         // index of the current fixed window
	curr     float64       // hits in the current fixed window
	prev     float64       // hits in the previous fixed window
	limit    float64       // the limit of the last Take, for eviction
	lastSeen int64         // unix nanoseconds
}

// Result is the outcome of one Take.
type Result struct {
	Allowed   bool
	Limit     int64
	Remaining int64
	// Reset is the time until the current fixed window ends (when denied:
	// RetryAfter).
	Reset time.Duration
	// RetryAfter is the time until a request would be allowed again (0 when
	// allowed).
	RetryAfter time.Duration
}

// NewStore returns a store holding at most maxKeys keys (DefaultMaxKeys
// when maxKeys ≤ 0).
func NewStore(maxKeys int) *Store {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	s := &Store{perShardMax: max(1, maxKeys/numShards), now: time.Now}
	for i := range s.shards {
		s.shards[i].m = map[string]*entry{}
	}
	return s
}

func (s *Store) shard(key []byte) *shard {
	// FNV-1a
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return &s.shards[h%numShards]
}

// Take counts one request for key against limit per window and reports
// whether it is allowed. Denied requests are not counted.
func (s *Store) Take(key string, limit int64, window time.Duration) Result {
	// TakeBytes only reads the key (and copies it when it stores it)
	return s.TakeBytes(unsafe.Slice(unsafe.StringData(key), len(key)), limit, window)
}

// TakeBytes is Take with the key in a byte slice, which the caller may
// reuse: a request whose key is already counted allocates nothing.
func (s *Store) TakeBytes(key []byte, limit int64, window time.Duration) Result {
	s.janitor.Do(func() { go s.sweepLoop() })
	if window <= 0 {
		window = time.Second
	}
	now := s.now()
	ns := now.UnixNano()
	idx := ns / int64(window)
	frac := float64(ns-idx*int64(window)) / float64(window)

	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[string(key)] // no allocation: a lookup only
	if e == nil || e.window != window {
		if e == nil && len(sh.m) >= s.perShardMax {
			sh.evict(ns)
		}
		e = &entry{window: window, idx: idx}
		sh.m[string(key)] = e
	}
	switch {
	case idx == e.idx:
	case idx == e.idx+1:
		e.prev, e.curr, e.idx = e.curr, 0, idx
	default:
		e.prev, e.curr, e.idx = 0, 0, idx
	}
	e.lastSeen = ns
	e.limit = float64(limit)

	allowed := e.prev*(1-frac)+e.curr < float64(limit)
	if allowed {
		e.curr++
	}
	return Outcome(allowed, e.prev, e.curr, frac, limit, window)
}

// Frac is how much of its fixed window of length window has passed at
// now: the weight 1-Frac of the previous window in the sliding estimate.
func Frac(now time.Time, window time.Duration) float64 {
	ns := now.UnixNano()
	idx := ns / int64(window)
	return float64(ns-idx*int64(window)) / float64(window)
}

// Outcome is the Result of a take against limit per window whose fixed
// windows held prev and curr hits (curr counting the request when it was
// allowed), frac of the current fixed window having passed. The local
// store and the shared ones (package ratelimit/shared) decide alike.
func Outcome(allowed bool, prev, curr, frac float64, limit int64, window time.Duration) Result {
	lim := float64(limit)
	untilEnd := time.Duration((1 - frac) * float64(window))
	if allowed {
		est := prev*(1-frac) + curr
		return Result{
			Allowed:   true,
			Limit:     limit,
			Remaining: int64(math.Max(0, math.Ceil(lim-est-1e-9))),
			Reset:     untilEnd,
		}
	}
	// Earliest time the estimate drops below the limit.
	var retry time.Duration
	if prev > 0 && curr < lim {
		retry = time.Duration((1 - frac - (lim-curr)/prev) * float64(window))
	} else {
		retry = untilEnd
		if curr > 0 && curr >= lim {
			retry += time.Duration((1 - lim/curr) * float64(window))
		}
	}
	if retry < 0 {
		retry = 0
	}
	return Result{Limit: limit, Reset: retry, RetryAfter: retry}
}

// evict makes room in a full shard for one key: of a random sample, the
// entry that holds the least of its limit goes (an idle one holds nothing),
// the least recently seen on a tie. A sample, not a scan of the shard: the
// shard is full on every new key while keys are sprayed, and the janitor
// sweeps idle entries anyway. Called with the lock held.
func (sh *shard) evict(now int64) {
	var victim string
	least, oldest := math.Inf(1), int64(math.MaxInt64)
	n := 0
	for k, e := range sh.m { // map iteration starts at a random point
		used := e.used(now)
		if used < least || used == least && e.lastSeen < oldest {
			victim, least, oldest = k, used, e.lastSeen
		}
		if n++; n >= sampleSize {
			break
		}
	}
	delete(sh.m, victim)
}

// used is the share of its limit the entry's sliding window holds at now:
// what evicting it would hand back to its client.
func (e *entry) used(now int64) float64 {
	if idle(e, now) {
		return 0
	}
	est := e.curr
	switch idx := now / int64(e.window); {
	case idx == e.idx+1:
		frac := float64(now-idx*int64(e.window)) / float64(e.window)
		est = e.curr * (1 - frac)
	case idx != e.idx:
		est = 0
	default:
		frac := float64(now-idx*int64(e.window)) / float64(e.window)
		est += e.prev * (1 - frac)
	}
	if e.limit <= 0 {
		return est
	}
	return est / e.limit
}

// idle reports whether an entry no longer affects any decision: both of its
// windows are over.
func idle(e *entry, now int64) bool {
	return now-e.lastSeen > 2*int64(e.window)
}

// Sweep removes idle keys and returns how many.
func (s *Store) Sweep() int {
	now := s.now().UnixNano()
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if idle(e, now) {
				delete(sh.m, k)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

func (s *Store) sweepLoop() {
	t := time.NewTicker(sweepPeriod)
	defer t.Stop()
	for range t.C {
		s.Sweep()
	}
}

// Len is the number of keys held.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Reset forgets every counter whose key starts with prefix ("" for all).
func (s *Store) Reset(prefix string) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k := range sh.m {
			if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
				delete(sh.m, k)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}
