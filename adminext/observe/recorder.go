// Package observe is what the gateway tells about its traffic: the request
// recorder (recent requests, the event stream, the request's own sinks),
// metrics (JSON and Prometheus), target health, the live configuration's
// summary and the router's dry run. Its tests are adminext/tests
// (observe, metrics, events and httplog tests run real traffic).
package observe

import (
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/modules/gwctx"
	"github.com/caddy-gateway/gateway/modules/records"
)

// RingSize is how many recent request records are kept (500, docs/operations.md).
const RingSize = 500

// Recorder turns completed requests into records: the recent-requests ring,
// live subscribers (the event stream) and the request's own sinks (http-log).
type Recorder struct {
	Metrics *Metrics
	History *History

	mu     sync.Mutex
	nextID int64
	ring   [RingSize]*records.Record
	n      int // records in the ring
	head   int // next write position
	subs   map[chan *records.Record]struct{}
	closed bool
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{Metrics: NewMetrics(), History: NewHistory(), subs: map[chan *records.Record]struct{}{}}
}

// Observe records one completed request.
func (rec *Recorder) Observe(r *http.Request, info *gwctx.Info, status int, bytes int64) {
	if status == 0 {
		status = info.Status
	}
	now := time.Now()
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	ip := gwctx.ClientIP(r)
	rc := &records.Record{
		Time:      now.UTC(),
		Method:    r.Method,
		Scheme:    scheme,
		Host:      r.Host,
		Path:      requestPath(r),
		Status:    status,
		LatencyMS: float64(now.Sub(info.Start).Microseconds()) / 1000,
		BytesSent: bytes,
		ClientIP:  &ip,
	}
	if info.Matched {
		rc.RouteID = ptr(info.RouteID)
		rc.ServiceID = ptr(info.ServiceID)
	}
	if info.Target != "" {
		rc.Target = ptr(info.Target)
	}
	if info.Consumer != nil {
		rc.ConsumerID = ptr(info.Consumer.ID)
	}
	if ua := r.UserAgent(); ua != "" {
		rc.UserAgent = &ua
	}
	if info.RequestID != "" {
		rc.RequestID = ptr(info.RequestID)
	}

	rec.Metrics.observe(info, status, now.Sub(info.Start))

	rec.mu.Lock()
	rec.nextID++
	rc.ID = rec.nextID
	// Under the recorder's lock: the history holds exactly the records up
	// to its last_id, which a client joins with the event stream.
	rec.History.observe(now, info, status, now.Sub(info.Start), rc.ID)
	rec.ring[rec.head] = rc
	rec.head = (rec.head + 1) % RingSize
	if rec.n < RingSize {
		rec.n++
	}
	for ch := range rec.subs {
		select {
		case ch <- rc:
		default: // a subscriber that falls behind loses events
		}
	}
	rec.mu.Unlock()

	for _, s := range info.Sinks {
		s.Enqueue(rc)
	}
}

// requestPath is the path the client asked for (before strip_path).
func requestPath(r *http.Request) string {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return orig.URL.Path
	}
	return r.URL.Path
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

// Subscribe returns a channel of new records; cancel ends the subscription.
func (rec *Recorder) Subscribe(buffer int) (ch <-chan *records.Record, cancel func()) {
	c := make(chan *records.Record, buffer)
	rec.mu.Lock()
	if !rec.closed {
		rec.subs[c] = struct{}{}
	}
	rec.mu.Unlock()
	return c, func() {
		rec.mu.Lock()
		if _, ok := rec.subs[c]; ok {
			delete(rec.subs, c)
			close(c)
		}
		rec.mu.Unlock()
	}
}

// Close ends every subscription.
func (rec *Recorder) Close() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.closed = true
	for c := range rec.subs {
		delete(rec.subs, c)
		close(c)
	}
}
