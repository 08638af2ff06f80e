package logsender

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/records"
)

// countBatch adds the number of records of the batch r posts to got.
func countBatch(t *testing.T, r *http.Request, got *atomic.Int64) {
	t.Helper()
	var batch []records.Record
	if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
		t.Error(err)
	}
	got.Add(int64(len(batch)))
}

func TestQueueBoundAndShutdownFlush(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { countBatch(t, r, &got) }))
	defer srv.Close()

	g := NewRegistry(time.Hour)
	s := g.Acquire("k", Config{Endpoint: srv.URL, BatchMaxSize: 100, FlushInterval: time.Hour, QueueMaxSize: 5})
	for i := 0; i < 8; i++ {
		s.Enqueue(&records.Record{ID: int64(i)})
	}
	if st := s.Stats(); st.Queued != 5 || st.Dropped != 3 || g.Dropped() != 3 {
		t.Fatalf("%+v", st)
	}
	// the same key is the same sender; a release keeps it for the grace
	if g.Acquire("k", Config{Endpoint: srv.URL, FlushInterval: time.Hour, QueueMaxSize: 5}) != s {
		t.Fatal("new sender for the same key")
	}
	g.Release(s)
	g.Release(s)
	if g.Len() != 1 {
		t.Fatal("released before the grace period")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.Shutdown(ctx)
	select {
	case <-s.Done():
	default:
		t.Fatal("sender still running")
	}
	if got.Load() != 5 || g.Len() != 0 || g.Sent() != 5 {
		t.Fatalf("delivered %d, senders %d", got.Load(), g.Len())
	}
}

func TestReleaseStopsAfterGrace(t *testing.T) {
	g := NewRegistry(50 * time.Millisecond)
	s := g.Acquire("k", Config{Endpoint: "http://127.0.0.1:9/"})
	g.Release(s)
	// re-acquired within the grace: kept
	if g.Acquire("k", Config{Endpoint: "http://127.0.0.1:9/"}) != s {
		t.Fatal("not kept")
	}
	time.Sleep(100 * time.Millisecond)
	if g.Len() != 1 {
		t.Fatal("stopped while held")
	}
	g.Release(s)
	select {
	case <-s.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("not stopped after the grace period")
	}
	if g.Len() != 0 {
		t.Fatal("still registered")
	}
}

// TestGoneSenderGivesUpOnAFailingCollector: a stopped sender (its plugin
// gone) tries its batches once each, and after a failed attempt gives up
// the rest of its queue. A collector that never answered kept the
// goroutine and the queue of a gone plugin for one timeout per batch.
func TestGoneSenderGivesUpOnAFailingCollector(t *testing.T) {
	var attempts atomic.Int64
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)

	g := NewRegistry(0)
	g.SetRetry(time.Hour, time.Hour, 2*time.Hour) // one attempt, then the wait the stop interrupts
	s := g.Acquire("k", Config{Endpoint: srv.URL, BatchMaxSize: 1, FlushInterval: time.Hour, Timeout: 20 * time.Millisecond, QueueMaxSize: 1000})
	const n = 200
	for i := 0; i < n; i++ {
		s.Enqueue(&records.Record{ID: int64(i)})
	}
	g.Release(s)
	<-s.Done()
	if a := attempts.Load(); a > 2 {
		t.Fatalf("%d attempts for a gone plugin's %d batches against a collector that never answers", a, n)
	}
	if st := s.Stats(); st.Failed != n || st.Queued != 0 {
		t.Fatalf("%+v", st)
	}
}

// TestHeldBytesBound: a sender holds records up to MaxHeldBytes of their
// estimated size (a record that would go past it is dropped and counted,
// whatever QueueMaxSize allows), a batch is at most maxBatchBytes of
// records, a batch being sent counts as its JSON body, and delivered
// batches stop counting.
func TestHeldBytesBound(t *testing.T) {
	var got, bodyLen atomic.Int64
	arrived, block := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bodyLen.CompareAndSwap(0, r.ContentLength)
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-block
		countBatch(t, r, &got)
	}))
	defer srv.Close()
	var unblock sync.Once
	release := func() { unblock.Do(func() { close(block) }) }
	defer release() // before srv.Close: a failed check must not leave the handler waiting

	g := NewRegistry(time.Hour)
	// woken at the 64th record, the last one the bound lets in
	s := g.Acquire("k", Config{Endpoint: srv.URL, BatchMaxSize: 64, FlushInterval: time.Hour, QueueMaxSize: 1000000})
	ip := "127.0.0.1"
	rec := &records.Record{Method: "GET", Scheme: "http", ClientIP: &ip}
	rec.Path = strings.Repeat("p", 1<<20-recordBytes(rec)) // 1 MiB a record
	for i := 0; i < MaxHeldBytes>>20+3; i++ {
		s.Enqueue(rec)
	}
	// 4 records (maxBatchBytes) are the batch at the collector, 60 are
	// queued
	<-arrived
	st := s.Stats()
	if st.Queued != 60 || st.Held != 60<<20+int(bodyLen.Load()) || st.Dropped != 3 || g.Dropped() != 3 {
		t.Fatalf("body of %d bytes: %+v", bodyLen.Load(), st)
	}
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.Shutdown(ctx)
	<-s.Done()
	if st := s.Stats(); got.Load() != 64 || st.Sent != 64 || st.Held != 0 || st.Queued != 0 || st.Batches != 16 {
		t.Fatalf("delivered %d: %+v", got.Load(), st)
	}
}

// TestBatchBodyBounded: JSON writes a control character as six bytes, so a
// batch's body may be several times its records' estimated size. A batch
// is cut at maxBatchBytes of records, and its body counts as held while it
// is sent (the 2,000 records below were one uncounted 99 MB body).
func TestBatchBodyBounded(t *testing.T) {
	var biggest, heldDuring atomic.Int64
	var s *Sender
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > biggest.Load() {
			biggest.Store(r.ContentLength)
			heldDuring.Store(int64(s.Stats().Held))
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()

	g := NewRegistry(time.Hour)
	const n = 2000
	s = g.Acquire("k", Config{Endpoint: srv.URL, BatchMaxSize: n, FlushInterval: time.Hour, QueueMaxSize: 1000000})
	rec := &records.Record{Method: "GET", Scheme: "http", Path: strings.Repeat("\x01", 8<<10)}
	for i := 0; i < n; i++ {
		s.Enqueue(rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g.Shutdown(ctx)
	<-s.Done()
	if st := s.Stats(); st.Sent != n || st.Held != 0 {
		t.Fatalf("%+v", st)
	}
	// 6 bytes a path byte, plus the keys and punctuation of each record
	if max := int64(6*maxBatchBytes + 4<<10); biggest.Load() > max {
		t.Errorf("a batch body of %d bytes (bound %d)", biggest.Load(), max)
	}
	if heldDuring.Load() < biggest.Load() {
		t.Errorf("held %d bytes while a %d-byte body was sent", heldDuring.Load(), biggest.Load())
	}
}

// The docs (queue_max_size's doc tag, docs/operations.md) give a record's
// overhead.
func TestRecordOverheadAsDocumented(t *testing.T) {
	if recordOverhead != 344 {
		t.Errorf("recordOverhead is %d bytes: the http-log docs say 344", recordOverhead)
	}
}
