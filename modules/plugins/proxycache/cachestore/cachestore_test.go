package cachestore

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func entry(body string, ttl time.Duration) *Entry {
	now := time.Now()
	return &Entry{Status: 200, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte(body), Stored: now, Expires: now.Add(ttl)}
}

func TestLRUEntries(t *testing.T) {
	s := New(1<<20, 3)
	for i := 0; i < 3; i++ {
		s.Set(fmt.Sprint(i), entry("x", time.Minute))
	}
	s.Get("0") // 1 is now the least recently used
	s.Set("3", entry("x", time.Minute))
	if _, ok := s.Get("1"); ok {
		t.Fatal("LRU entry not evicted")
	}
	for _, k := range []string{"0", "2", "3"} {
		if _, ok := s.Get(k); !ok {
			t.Fatalf("%s evicted", k)
		}
	}
	if s.Len() != 3 {
		t.Fatal(s.Len())
	}
}

func TestLRUBytes(t *testing.T) {
	s := New(40_000, 1000)
	body := string(make([]byte, 9000))
	for i := 0; i < 10; i++ {
		if !s.Set(fmt.Sprint(i), entry(body, time.Minute)) {
			t.Fatal("refused")
		}
	}
	st := s.Stats()
	if st.Bytes > 40_000 || st.Entries != 4 {
		t.Fatalf("%+v", st)
	}
	if s.Set("huge", entry(string(make([]byte, 20_000)), time.Minute)) {
		t.Fatal("an entry over a quarter of the bound must be refused")
	}
	// replacing a key does not leak bytes
	before := s.Stats().Bytes
	s.Set("9", entry(body, time.Minute))
	if s.Stats().Bytes != before {
		t.Fatal("bytes accounting")
	}
}

func TestExpiryAndPurge(t *testing.T) {
	s := New(0, 0)
	s.Set("a:1", entry("x", -time.Second))
	if _, ok := s.Get("a:1"); ok || s.Len() != 0 {
		t.Fatal("expired entry returned")
	}
	s.Set("a:1", entry("x", time.Minute))
	s.Set("a:2", entry("x", time.Minute))
	s.Set("a:3", &Entry{VaryNames: []string{"Accept"}, Expires: time.Now().Add(time.Minute)})
	s.Set("b:1", entry("x", time.Minute))
	if n := s.PurgePrefix("a:"); n != 2 {
		t.Fatalf("purged %d", n)
	}
	if st := s.Stats(); st.Entries != 1 || st.Keys != 1 {
		t.Fatalf("%+v", st)
	}
	if s.Purge() != 1 || s.Stats().Bytes != 0 {
		t.Fatal("purge all")
	}
}
