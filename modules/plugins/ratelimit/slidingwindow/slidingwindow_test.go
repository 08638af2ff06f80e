package slidingwindow

import (
	"fmt"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestStore(max int) (*Store, *clock) {
	s := NewStore(max)
	c := &clock{t: time.Unix(1_000_000, 0)} // aligned to a 60 s window start (1e6 % 60 = 40 s in: see below)
	c.t = time.Unix(1_000_020, 0)           // 1_000_020 is a multiple of 60
	s.now = c.now
	s.janitor.Do(func() {}) // no background sweeper in unit tests
	return s, c
}

func TestTakeFixedWindow(t *testing.T) {
	s, c := newTestStore(0)
	w := time.Minute
	for i := 0; i < 5; i++ {
		r := s.Take("k", 5, w)
		if !r.Allowed || r.Remaining != int64(4-i) || r.Limit != 5 {
			t.Fatalf("request %d: %+v", i, r)
		}
		if r.Reset != w {
			t.Fatalf("reset %v", r.Reset)
		}
	}
	r := s.Take("k", 5, w)
	if r.Allowed || r.Remaining != 0 {
		t.Fatalf("6th: %+v", r)
	}
	// prev=0, curr=5=limit: wait for the window end plus ~0 of the next
	if r.RetryAfter != w {
		t.Fatalf("retry after %v", r.RetryAfter)
	}
	// other keys are independent
	if !s.Take("other", 5, w).Allowed {
		t.Fatal("other key limited")
	}
	// halfway into the next window the previous one weighs 50%: 2.5 used
	c.t = c.t.Add(w + w/2)
	allowed := 0
	for s.Take("k", 5, w).Allowed {
		allowed++
	}
	if allowed != 3 { // 2.5 → 3.5 → 4.5 → 5.5
		t.Fatalf("allowed %d after half a window, want 3", allowed)
	}
	r = s.Take("k", 5, w)
	// est = 5*(1-f) + 3 < 5  ⇔  f > 0.6: 0.1 window from now
	if r.RetryAfter < 5*time.Second || r.RetryAfter > 7*time.Second {
		t.Fatalf("retry after %v, want ~6s", r.RetryAfter)
	}
	c.t = c.t.Add(r.RetryAfter + time.Millisecond)
	if !s.Take("k", 5, w).Allowed {
		t.Fatal("not allowed after Retry-After")
	}
	// two windows later everything is forgotten
	c.t = c.t.Add(2 * w)
	r = s.Take("k", 5, w)
	if !r.Allowed || r.Remaining != 4 {
		t.Fatalf("after 2 windows: %+v", r)
	}
}

func TestSweepAndCap(t *testing.T) {
	s, c := newTestStore(numShards * 4) // 4 keys per shard
	for i := 0; i < 1000; i++ {
		s.Take(fmt.Sprint("key", i), 10, time.Second)
		c.t = c.t.Add(time.Millisecond)
	}
	if n := s.Len(); n > numShards*4 {
		t.Fatalf("%d keys held, cap %d", n, numShards*4)
	}
	c.t = c.t.Add(3 * time.Second)
	if n := s.Sweep(); n == 0 || s.Len() != 0 {
		t.Fatalf("swept %d, %d left", n, s.Len())
	}
	s.Take("a:1", 1, time.Second)
	s.Take("b:1", 1, time.Second)
	if s.Reset("a:") != 1 || s.Len() != 1 {
		t.Fatal("reset by prefix")
	}
}

func TestWindowChange(t *testing.T) {
	s, _ := newTestStore(0)
	s.Take("k", 1, time.Minute)
	if s.Take("k", 1, time.Minute).Allowed {
		t.Fatal("limit 1")
	}
	if !s.Take("k", 1, time.Hour).Allowed {
		t.Fatal("a new window length starts a new counter")
	}
}

// A client spraying fresh keys at a full store must not reset another
// client's exhausted counter: the spray's one-request counters go first.
func TestSprayKeepsExhaustedCounters(t *testing.T) {
	s, c := newTestStore(numShards * 16)
	const limit = 20
	victims := []string{"victim-a", "victim-b", "victim-c"}
	for _, v := range victims {
		for s.Take(v, limit, time.Hour).Allowed {
		}
	}
	// the victims stop asking; a minute later the spray starts
	c.t = c.t.Add(time.Minute)
	for i := 0; i < 200_000; i++ {
		s.Take(fmt.Sprint("spray-", i), limit, time.Hour)
		if i%1000 == 0 {
			c.t = c.t.Add(time.Millisecond)
		}
	}
	if n := s.Len(); n > numShards*16 {
		t.Fatalf("%d keys held, cap %d", n, numShards*16)
	}
	for _, v := range victims {
		if s.Take(v, limit, time.Hour).Allowed {
			t.Errorf("%s: its exhausted counter was evicted by the spray", v)
		}
	}
}

// At the cap, a new key costs a sample, not a scan of the shard.
func BenchmarkTakeFullStore(b *testing.B) {
	s, _ := newTestStore(DefaultMaxKeys)
	for i := 0; i < DefaultMaxKeys; i++ {
		s.Take(fmt.Sprint("k", i), 10, time.Hour)
	}
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = fmt.Sprint("new", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Take(keys[i%len(keys)], 10, time.Hour)
	}
}
