// Package observe is what the gateway tells about its traffic: the request
// recorder (recent requests, the event stream, the request's own sinks),
// metrics (JSON and Prometheus), target health, the live configuration's
// summary and the router's dry run. Its tests are app/tests
// (observe, metrics, events and httplog tests run real traffic).
package observe

import (
	"slices"
	"sync"
	"time"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/records"
)

// RingSize is how many recent request records are kept (500, docs/operations.md).
const RingSize = 500

// MaxStreamsPerCaller is how many event streams one caller (a user, the
// admin token, open mode) holds open at once on a node; a newer one ends
// the caller's oldest. Every stream is a goroutine and a 256-record
// buffer, and every proxied request is handed to every stream under the
// recorder's lock: unbounded, a viewer opening streams by the thousand
// would slow the proxy path for everyone.
const MaxStreamsPerCaller = 16

// Recorder turns completed requests into records: the recent-requests ring,
// live subscribers (the event stream) and the request's own sinks (http-log).
type Recorder struct {
	Metrics *Metrics
	History *History

	mu   sync.Mutex
	ring [RingSize]*records.Record
	n    int // records in the ring
	head int // next write position
	// subs are the live subscribers, by caller, oldest first.
	subs   map[string][]chan *records.Record
	closed bool
}

// NewRecorder returns an empty recorder whose metrics also report live's
// target health and stream connections.
func NewRecorder(live Live) *Recorder {
	return &Recorder{Metrics: NewMetrics(live), History: NewHistory(), subs: map[string][]chan *records.Record{}}
}

// Observe records one completed request (its record built once, by
// gwctx.NewRecord) and hands it to the request's own sinks (http-log).
func (rec *Recorder) Observe(rc *records.Record, info *gwctx.Info) {
	latency := time.Duration(rc.LatencyMS * float64(time.Millisecond))
	rec.Metrics.observe(info, rc.Status, latency)

	rec.mu.Lock()
	rc.ID = gwctx.NextRecordID() // under the lock: ids increase in ring order
	// Under the recorder's lock: the history holds exactly the records up
	// to its last_id, which a client joins with the event stream.
	rec.History.observe(rc.Time, info, rc.Status, latency, rc.ID)
	rec.ring[rec.head] = rc
	rec.head = (rec.head + 1) % RingSize
	if rec.n < RingSize {
		rec.n++
	}
	for _, held := range rec.subs {
		for _, ch := range held {
			select {
			case ch <- rc:
			default: // a subscriber that falls behind loses events
			}
		}
	}
	rec.mu.Unlock()

	for _, s := range info.Sinks {
		s.Enqueue(rc)
	}
}

func ptr[T any](v T) *T { return &v }

// Recent returns up to limit records, newest first.
func (rec *Recorder) Recent(limit int) []*records.Record {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if limit > rec.n {
		limit = rec.n
	}
	out := make([]*records.Record, 0, limit)
	for i := 1; i <= limit; i++ {
		out = append(out, rec.ring[(rec.head-i+RingSize)%RingSize])
	}
	return out
}

// Subscribe returns a channel of new records for caller; cancel ends the
// subscription. When caller already holds MaxStreamsPerCaller
// subscriptions, its oldest ends (its channel is closed).
func (rec *Recorder) Subscribe(caller string, buffer int) (ch <-chan *records.Record, cancel func()) {
	c := make(chan *records.Record, buffer)
	rec.mu.Lock()
	if !rec.closed {
		if held := rec.subs[caller]; len(held) >= MaxStreamsPerCaller {
			rec.drop(caller, held[0])
		}
		rec.subs[caller] = append(rec.subs[caller], c)
	}
	rec.mu.Unlock()
	return c, func() {
		rec.mu.Lock()
		rec.drop(caller, c)
		rec.mu.Unlock()
	}
}

// drop ends caller's subscription c, if it is still open (rec.mu held).
func (rec *Recorder) drop(caller string, c chan *records.Record) {
	held := rec.subs[caller]
	i := slices.Index(held, c)
	if i < 0 {
		return
	}
	close(c)
	if held = slices.Delete(held, i, i+1); len(held) == 0 {
		delete(rec.subs, caller)
	} else {
		rec.subs[caller] = held
	}
}

// Close ends every subscription.
func (rec *Recorder) Close() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.closed = true
	for _, held := range rec.subs {
		for _, c := range held {
			close(c)
		}
	}
	clear(rec.subs)
}
