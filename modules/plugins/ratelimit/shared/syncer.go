package shared

import (
	"context"
	"sync"
	"time"
)

// MaxSyncedKeys bounds the keys a Syncer holds; a request for another key
// past it is counted in the store at once (as with sync_interval_ms 0).
const MaxSyncedKeys = 1 << 16

// Syncer counts on this node and exchanges the counts with a shared store
// every interval (sync_interval_ms above 0): a request is decided against
// the shared counts of the last exchange plus this node's requests since,
// which it sends as one batch at the next. Between two exchanges the other
// nodes' requests are unseen, so a window admits at most the limit plus
// what the other nodes admitted within one interval (never more than the
// number of nodes times the limit).
type Syncer struct {
	store    Store // read-only
	interval time.Duration

	mu   sync.Mutex
	keys map[string]*syncedKey
	// synced reports whether the last exchange reached the store.
	synced bool
}

type syncedKey struct {
	limit    int64
	window   time.Duration
	idx      int64 // the store's fixed window of prev and curr
	prev     int64
	curr     int64 // including this node's batches sent so far
	pending  int64 // this node's hits not yet sent
	lastSeen time.Time
}

var syncers struct {
	mu sync.Mutex
	m  map[syncerKey]*Syncer
}

type syncerKey struct {
	store    Store
	interval time.Duration
}

// SyncerFor is the process's syncer of store at interval, started on first
// use and kept for the process (a reload keeps its counts).
func SyncerFor(store Store, interval time.Duration) *Syncer {
	syncers.mu.Lock()
	defer syncers.mu.Unlock()
	if syncers.m == nil {
		syncers.m = map[syncerKey]*Syncer{}
	}
	k := syncerKey{store, interval}
	if s := syncers.m[k]; s != nil {
		return s
	}
	s := &Syncer{store: store, interval: interval, keys: map[string]*syncedKey{}, synced: true}
	syncers.m[k] = s
	go s.loop()
	return s
}

// Take decides a request on key from the last exchange's counts and this
// node's since. ok is false for a key not held yet: the caller counts the
// request in the store directly and hands the answer to Seed, so that a
// fresh key starts from the shared counts. synced is false while the store
// is unreachable (the decision is this node's alone).
func (s *Syncer) Take(key string, limit int64, window time.Duration, now time.Time) (c Counts, ok, synced bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	if k == nil || k.window != window {
		return Counts{}, false, s.synced
	}
	k.limit, k.lastSeen = limit, now
	prev, curr := k.at(now)
	curr += k.pending
	frac := float64(now.UnixMicro()%window.Microseconds()) / float64(window.Microseconds())
	c = Counts{Prev: prev, Curr: curr, Now: now}
	if float64(prev)*(1-frac)+float64(curr) < float64(limit) {
		k.pending++
		c.Allowed, c.Curr = true, curr+1
	}
	return c, true, s.synced
}

// Seed holds key from now on with the counts of a direct take (a key past
// MaxSyncedKeys is not held: it is counted in the store on every request).
func (s *Syncer) Seed(key string, limit int64, window time.Duration, c Counts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) >= MaxSyncedKeys && s.keys[key] == nil {
		return
	}
	s.keys[key] = &syncedKey{limit: limit, window: window, idx: c.Now.UnixMicro() / window.Microseconds(),
		prev: c.Prev, curr: c.Curr, lastSeen: time.Now()}
}

// at is the key's shared counts moved to the fixed window of now.
func (k *syncedKey) at(now time.Time) (prev, curr int64) {
	idx := now.UnixMicro() / k.window.Microseconds()
	switch idx {
	case k.idx:
		return k.prev, k.curr
	case k.idx + 1:
		return k.curr, 0
	}
	return 0, 0
}

func (s *Syncer) loop() {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for range t.C {
		s.exchange()
	}
}

// exchange sends every key's pending hits (a take of 0 hits for a key
// without any: the other nodes' counts) and takes the store's counts
// back. Keys idle for two windows are dropped.
func (s *Syncer) exchange() {
	type job struct {
		key     string
		k       syncedKey
		pending int64
	}
	now := time.Now()
	var jobs []job
	s.mu.Lock()
	for key, k := range s.keys {
		if now.Sub(k.lastSeen) > 2*k.window {
			delete(s.keys, key)
			continue
		}
		jobs = append(jobs, job{key, *k, k.pending})
		k.pending = 0
	}
	s.mu.Unlock()
	ok := true
	for _, j := range jobs {
		var c Counts
		var err error
		if ok {
			c, err = s.store.Take(context.Background(), j.key, j.k.limit, j.k.window, j.pending, false)
		}
		s.mu.Lock()
		k := s.keys[j.key]
		switch {
		case !ok || err != nil:
			// Kept for the next exchange; the rest of this one waits too.
			ok = false
			if k != nil {
				k.pending += j.pending
			}
		case k != nil && k.window == j.k.window:
			k.idx = c.Now.UnixMicro() / k.window.Microseconds()
			k.prev, k.curr = c.Prev, c.Curr
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.synced = ok && s.store.Up()
	s.mu.Unlock()
}

// Store is the store the syncer exchanges with.
func (s *Syncer) Store() Store { return s.store }
