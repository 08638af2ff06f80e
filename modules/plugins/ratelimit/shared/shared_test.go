package shared

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/pgtest"
	"github.com/caddy-gateway/gateway/internal/redistest"
)

// waitUp waits until the store's probe found it up.
func waitUp(t testing.TB, s Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !s.Up() {
		if time.Now().After(deadline) {
			t.Fatal("the store is not up after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exactLimit takes from several stores (nodes) on one key concurrently:
// exactly limit takes are allowed.
func exactLimit(t *testing.T, nodes []Store) {
	t.Helper()
	const limit, perWorker, workers = 50, 30, 8
	var allowed atomic.Int64
	var wg sync.WaitGroup
	key := "exact/" + time.Now().String()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := nodes[w%len(nodes)]
			for range perWorker {
				c, err := s.Take(context.Background(), key, limit, time.Hour, 1, true)
				if err != nil {
					t.Error(err)
					return
				}
				if c.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != limit {
		t.Fatalf("allowed %d of %d takes with a limit of %d, want exactly the limit", got, workers*perWorker, limit)
	}
	// A batch adds without checking, and the counts come back.
	c, err := nodes[0].Take(context.Background(), key, limit, time.Hour, 5, false)
	if err != nil || !c.Allowed || c.Curr+c.Prev != limit+5 {
		t.Fatalf("batch of 5 after the limit: %+v %v", c, err)
	}
}

func TestRedisExact(t *testing.T) {
	srv := redistest.Start(t)
	var nodes []Store
	for range 3 {
		s, err := NewRedisStore(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		waitUp(t, s)
		nodes = append(nodes, s)
	}
	exactLimit(t, nodes)
}

func TestPostgresExact(t *testing.T) {
	pg := pgtest.Start(t)
	var nodes []Store
	for _, dsn := range []string{pg.DSN, pg.URL(), pg.URL()} {
		s, err := NewPostgresStore(dsn)
		if err != nil {
			t.Fatal(err)
		}
		// Exactness, not latency, is tested here: the machine running the
		// tests may be loaded far beyond a store's usual answer time.
		s.timeout = 10 * time.Second
		t.Cleanup(s.Close)
		waitUp(t, s)
		nodes = append(nodes, s)
	}
	exactLimit(t, nodes)
}

// A store that goes away is reported down (takes fail fast, within
// Timeout) and up again when it returns.
func TestRedisDownAndBack(t *testing.T) {
	srv := redistest.Start(t)
	s, err := NewRedisStore(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitUp(t, s)
	srv.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for s.Up() {
		if time.Now().After(deadline) {
			t.Fatal("still up 5 s after Redis stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	if _, err := s.Take(context.Background(), "k", 1, time.Minute, 1, true); err == nil {
		t.Fatal("a take succeeded while Redis is stopped")
	}
	if d := time.Since(start); d > 2*Timeout {
		t.Fatalf("a take while down took %v", d)
	}
	srv.Restart()
	waitUp(t, s)
	if c, err := s.Take(context.Background(), "k", 1, time.Minute, 1, true); err != nil || !c.Allowed {
		t.Fatalf("after the restart: %+v %v", c, err)
	}
}

// With a sync interval, three nodes' syncers on one key admit the limit
// and no more than the documented bound: what the other nodes admitted in
// one interval on top (here each node sends at most one burst per
// interval, bounded by the limit each).
func TestSyncerBound(t *testing.T) {
	srv := redistest.Start(t)
	const limit = 30
	var syncers []*Syncer
	var stores []Store
	for range 3 {
		s, err := NewRedisStore(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		waitUp(t, s)
		stores = append(stores, s)
		syncers = append(syncers, SyncerFor(s, 50*time.Millisecond))
	}
	key := "sync/" + time.Now().String()
	allowed := 0
	// Requests spread over the nodes, slower than the interval: each node
	// sees the others' counts, so the total stays at the limit plus at
	// most what was admitted within the last interval.
	for i := range 200 {
		n := i % 3
		c, held, synced := syncers[n].Take(key, limit, time.Hour, time.Now())
		if !held {
			var err error
			c, err = stores[n].Take(context.Background(), key, limit, time.Hour, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			syncers[n].Seed(key, limit, time.Hour, c)
		} else if !synced {
			t.Fatal("not synced while Redis runs")
		}
		if c.Allowed {
			allowed++
		}
		time.Sleep(5 * time.Millisecond)
	}
	if allowed < limit || allowed > limit+limit/2 {
		t.Fatalf("allowed %d with a limit of %d over three syncing nodes", allowed, limit)
	}
	t.Logf("allowed %d with a limit of %d", allowed, limit)
}
