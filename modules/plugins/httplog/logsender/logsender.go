// Package logsender delivers request records to HTTP collectors for the
// http-log plugin: per plugin instance a bounded queue (Enqueue never blocks;
// records beyond the bounds, a count and MaxHeldBytes, are dropped and
// counted) and one background
// goroutine that posts JSON arrays of records in batches, retrying with
// exponential backoff, never on a request's path.
//
// Senders live in a Registry beside the plugin (httplog/state.go) keyed by
// plugin instance, so a config reload neither loses the queue nor restarts the
// sender; a sender whose plugin disappears (no config holds it any more for
// a grace period) flushes what it has and stops.
package logsender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/internal/records"
)

// Defaults of a Registry.
const (
	DefaultGrace        = 10 * time.Second
	DefaultRetryBase    = 250 * time.Millisecond
	DefaultRetryMax     = 30 * time.Second
	DefaultRetryWindow  = 60 * time.Second
	maxErrorBodyToDrain = 64 << 10
)

// MaxHeldBytes bounds the records a sender holds, queued or in the batch
// being sent, by their estimated size (recordBytes); a record that would
// take it past the bound is dropped and counted, as one beyond
// QueueMaxSize is. The count alone bounds nothing useful: QueueMaxSize may
// be 1,000,000, and a record carries up to ~3.3 KB the client chose (its
// path, host, method and user agent, up to gwctx.MaxRecordPath and
// MaxRecordShort bytes), so with a collector down one plugin held ~3 GB.
// 64 MiB is the queue of a collector down for a few minutes at a few
// hundred requests a second, with everyday records (a few hundred bytes).
const MaxHeldBytes = 64 << 20

// maxBatchBytes bounds one batch by its records' estimated size, whatever
// BatchMaxSize allows: once encoded, the batch is held as its JSON body
// instead of its records (see Sender.encode), and JSON escapes a control
// character a client put in a path in six bytes, so a body may be several
// times its records. A batch of at most 4 MiB keeps that excess past
// MaxHeldBytes to about 20 MiB; 10,000 records of everyday size are about
// 3 MiB.
const maxBatchBytes = 4 << 20

// recordOverhead is what a held record takes beside its strings: the
// sender's copy, its queue slot, and the values its optional fields point
// to (gwctx allocates them with the record; shared with the other sinks,
// counted here anyway).
const recordOverhead = int(unsafe.Sizeof(records.Record{})) + 8 + 4*8 + 6*int(unsafe.Sizeof(""))

// recordBytes is a record's estimated size: its strings and the overhead.
func recordBytes(r *records.Record) int {
	n := recordOverhead + len(r.Method) + len(r.Scheme) + len(r.Host) + len(r.Path)
	for _, p := range []*string{r.Target, r.ClientIP, r.UserAgent, r.RequestID, r.TraceID, r.SpanID} {
		if p != nil {
			n += len(*p)
		}
	}
	if w := r.WAF; w != nil {
		n += int(unsafe.Sizeof(*w)) + len(w.Action)
		for _, rule := range w.Rules {
			n += int(unsafe.Sizeof(rule)) + len(rule.Message)
		}
	}
	return n
}

// bytesOf is the estimated size of rs (recordBytes).
func bytesOf(rs []*records.Record) int {
	n := 0
	for _, r := range rs {
		n += recordBytes(r)
	}
	return n
}

// Config is what a sender delivers where.
type Config struct {
	Endpoint      string
	Method        string
	Headers       map[string]string
	BatchMaxSize  int
	FlushInterval time.Duration
	Timeout       time.Duration
	QueueMaxSize  int
}

func (c *Config) normalize() {
	if c.Method == "" {
		c.Method = http.MethodPost
	}
	if c.BatchMaxSize < 1 {
		c.BatchMaxSize = 100
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.QueueMaxSize < 1 {
		c.QueueMaxSize = 10000
	}
}

// Registry holds the senders of a process. Safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	senders map[string]*Sender
	grace   time.Duration
	retry   struct{ base, max, window time.Duration }

	dropped atomic.Uint64 // over all senders, stopped ones included
	sent    atomic.Uint64
	failed  atomic.Uint64
}

// NewRegistry returns a registry whose senders stop grace after their last
// plugin instance is released.
func NewRegistry(grace time.Duration) *Registry {
	g := &Registry{senders: map[string]*Sender{}, grace: grace}
	g.retry.base, g.retry.max, g.retry.window = DefaultRetryBase, DefaultRetryMax, DefaultRetryWindow
	return g
}

// SetGrace changes the grace period of later releases.
func (g *Registry) SetGrace(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.grace = d
}

// SetRetry changes the backoff of later retries: the first wait, the longest
// wait, and how long a batch is retried before it is given up (counted as
// failed).
func (g *Registry) SetRetry(base, max, window time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.retry.base, g.retry.max, g.retry.window = base, max, window
}

// Acquire returns the sender under key, started if new, with cfg applied,
// and counts a reference to it (release it with Release).
func (g *Registry) Acquire(key string, cfg Config) *Sender {
	cfg.normalize()
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.senders[key]
	if s == nil {
		s = &Sender{
			key:    key,
			reg:    g,
			cfg:    cfg,
			wake:   make(chan struct{}, 1),
			stop:   make(chan struct{}),
			done:   make(chan struct{}),
			client: newClient(),
		}
		g.senders[key] = s
		go s.run()
	} else {
		s.setConfig(cfg)
	}
	s.refs++
	s.gen++
	return s
}

// Release drops a reference taken by Acquire. A sender without references
// flushes its queue and stops after the grace period, unless acquired again
// meanwhile.
func (g *Registry) Release(s *Sender) {
	if s == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.refs > 0 {
		s.refs--
	}
	if s.refs > 0 {
		return
	}
	gen := s.gen
	time.AfterFunc(g.grace, func() {
		g.mu.Lock()
		if s.refs > 0 || s.gen != gen || g.senders[s.key] != s {
			g.mu.Unlock()
			return
		}
		delete(g.senders, s.key)
		g.mu.Unlock()
		close(s.stop)
	})
}

// Shutdown stops every sender at once: each sends what it has queued (one
// attempt per batch) and stops. It returns when all have stopped or ctx is
// done. For process exit; senders acquired afterwards start afresh.
func (g *Registry) Shutdown(ctx context.Context) {
	g.mu.Lock()
	list := make([]*Sender, 0, len(g.senders))
	for k, s := range g.senders {
		list = append(list, s)
		delete(g.senders, k)
	}
	g.mu.Unlock()
	for _, s := range list {
		close(s.stop)
	}
	for _, s := range list {
		select {
		case <-s.done:
		case <-ctx.Done():
			return
		}
	}
}

// Stats describes one sender.
type Stats struct {
	Key      string `json:"key"`
	Endpoint string `json:"endpoint"`
	Queued   int    `json:"queued"`
	Held     int    `json:"held_bytes"` // estimated bytes of the queued records, and the body of the batch being sent (MaxHeldBytes)
	Sent     uint64 `json:"sent"`
	Dropped  uint64 `json:"dropped"`
	Failed   uint64 `json:"failed"`
	Batches  uint64 `json:"batches"`
}

// Stats lists the running senders.
func (g *Registry) Stats() []Stats {
	g.mu.Lock()
	list := make([]*Sender, 0, len(g.senders))
	for _, s := range g.senders {
		list = append(list, s)
	}
	g.mu.Unlock()
	out := make([]Stats, 0, len(list))
	for _, s := range list {
		out = append(out, s.Stats())
	}
	slices.SortFunc(out, func(a, b Stats) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	return out
}

// Dropped is the number of records dropped because a queue was full, over
// all senders since the process started.
func (g *Registry) Dropped() uint64 { return g.dropped.Load() }

// Sent is the number of records delivered, over all senders.
func (g *Registry) Sent() uint64 { return g.sent.Load() }

// Failed is the number of records given up after retries, over all senders.
func (g *Registry) Failed() uint64 { return g.failed.Load() }

// Len is the number of running senders.
func (g *Registry) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.senders)
}

// Sender queues records and delivers them in the background. It is a
// records.Sink.
type Sender struct {
	key    string
	reg    *Registry
	client *http.Client

	refs, gen int // guarded by reg.mu

	mu    sync.Mutex
	cfg   Config
	queue []*records.Record
	held  int // recordBytes of the queue, and the JSON body of the batch being sent (MaxHeldBytes)

	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	dropped, sent, failed, batches atomic.Uint64
}

// Enqueue adds a record to the queue without ever blocking; a full queue
// (QueueMaxSize records, or MaxHeldBytes held) drops it (counted).
func (s *Sender) Enqueue(r *records.Record) {
	if r == nil {
		return
	}
	c := *r
	n := recordBytes(&c)
	s.mu.Lock()
	if len(s.queue) >= s.cfg.QueueMaxSize || s.held+n > MaxHeldBytes {
		s.mu.Unlock()
		s.dropped.Add(1)
		s.reg.dropped.Add(1)
		return
	}
	s.queue = append(s.queue, &c)
	s.held += n
	full := len(s.queue) >= s.cfg.BatchMaxSize
	s.mu.Unlock()
	if full {
		s.signal()
	}
}

func (s *Sender) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Sender) setConfig(cfg Config) {
	s.mu.Lock()
	changed := !reflect.DeepEqual(s.cfg, cfg)
	s.cfg = cfg
	s.mu.Unlock()
	if changed {
		s.signal() // pick up a new flush interval now
	}
}

// Dropped is the number of records this sender dropped (queue full).
func (s *Sender) Dropped() uint64 { return s.dropped.Load() }

// Stats describes the sender.
func (s *Sender) Stats() Stats {
	s.mu.Lock()
	q, held, ep := len(s.queue), s.held, s.cfg.Endpoint
	s.mu.Unlock()
	return Stats{Key: s.key, Endpoint: ep, Queued: q, Held: held, Sent: s.sent.Load(), Dropped: s.dropped.Load(), Failed: s.failed.Load(), Batches: s.batches.Load()}
}

// Done is closed once the sender has stopped.
func (s *Sender) Done() <-chan struct{} { return s.done }

// take removes up to one batch from the queue (BatchMaxSize records, at
// most maxBatchBytes of them but at least one) and encodes it; with
// fullOnly, only a full batch. The batch's records are let go: its body
// is held in their place (MaxHeldBytes) until its caller is done with it
// and calls release. ok is false when there is nothing to send.
func (s *Sender) take(fullOnly bool) (b batch, cfg Config, ok bool) {
	s.mu.Lock()
	n, size := 0, 0
	for n < min(len(s.queue), s.cfg.BatchMaxSize) {
		r := recordBytes(s.queue[n])
		if n > 0 && size+r > maxBatchBytes {
			break
		}
		n, size = n+1, size+r
	}
	full := n == s.cfg.BatchMaxSize || n < len(s.queue)
	if n == 0 || (fullOnly && !full) {
		cfg = s.cfg
		s.mu.Unlock()
		return batch{}, cfg, false
	}
	recs := slices.Clone(s.queue[:n])
	clear(s.queue[:n])
	s.queue = s.queue[n:]
	if len(s.queue) == 0 {
		s.queue = nil // let the backing array go
	}
	cfg = s.cfg
	s.mu.Unlock()

	b = batch{records: n}
	body, err := json.Marshal(recs)
	if err == nil {
		b.body = body
	}
	s.mu.Lock()
	s.held += len(b.body) - size
	s.mu.Unlock()
	return b, cfg, true
}

// batch is a batch taken from the queue: how many records, and their
// JSON array (nil when they could not be encoded).
type batch struct {
	records int
	body    []byte
}

// release stops holding a batch that take returned (delivered or given
// up).
func (s *Sender) release(b batch) {
	s.mu.Lock()
	s.held -= len(b.body)
	s.mu.Unlock()
}

func (s *Sender) interval() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.FlushInterval
}

func (s *Sender) run() {
	defer close(s.done)
	iv := s.interval()
	timer := time.NewTimer(iv)
	defer timer.Stop()
	for {
		flushAll := false
		select {
		case <-s.stop:
			s.flushOnce()
			return
		case <-s.wake:
		case <-timer.C:
			flushAll = true
		}
		for {
			b, cfg, ok := s.take(!flushAll)
			if !ok {
				break
			}
			ok = s.deliver(b, cfg)
			s.release(b)
			if !ok {
				break // stopping
			}
		}
		if flushAll || s.interval() != iv {
			iv = s.interval()
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(iv)
		}
	}
}

// flushOnce sends what is left, one attempt per batch (the plugin is
// gone), and gives up the rest after a failed attempt: a collector that is
// down or never answers would otherwise keep the goroutine and the queue
// of a gone plugin for a timeout per batch (up to 10,000 batches of up to
// 10 minutes each), and every plugin created and deleted meanwhile would
// add one more.
func (s *Sender) flushOnce() {
	for {
		b, cfg, ok := s.take(false)
		if !ok {
			return
		}
		err := errEncoding
		if b.body != nil {
			err = s.post(b.body, cfg)
		}
		s.release(b)
		if err != nil {
			s.giveUp(b.records)
			s.giveUpQueue()
			return
		}
		s.delivered(b.records)
	}
}

// giveUpQueue empties the queue, counting its records as failed.
func (s *Sender) giveUpQueue() {
	s.mu.Lock()
	n := len(s.queue)
	s.held -= bytesOf(s.queue)
	s.queue = nil
	s.mu.Unlock()
	s.giveUp(n)
}

// deliver posts a batch, retrying with exponential backoff for up to the
// retry window. It returns false when the sender is stopping.
func (s *Sender) deliver(b batch, cfg Config) bool {
	body := b.body
	if body == nil {
		s.giveUp(b.records)
		return true
	}
	s.reg.mu.Lock()
	wait, maxWait, window := s.reg.retry.base, s.reg.retry.max, s.reg.retry.window
	s.reg.mu.Unlock()
	deadline := time.Now().Add(window)
	for {
		err := s.post(body, cfg)
		if err == nil {
			s.delivered(b.records)
			return true
		}
		if errors.Is(err, guard.ErrForbidden) {
			// The endpoint (or a redirect, or what its name resolves to)
			// is one of the process's control endpoints: never retried.
			caddy.Log().Named("http_log").Error("records not delivered: the endpoint reaches a control endpoint of the gateway",
				zap.String("sender", s.key), zap.Int("records", b.records), zap.Error(err))
			s.giveUp(b.records)
			return true
		}
		if time.Now().Add(wait).After(deadline) {
			s.giveUp(b.records)
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-s.stop:
			t.Stop()
			// one last try for this batch, then the rest of the queue
			// (given up too when the collector still fails)
			if s.post(body, cfg) == nil {
				s.delivered(b.records)
				s.flushOnce()
			} else {
				s.giveUp(b.records)
				s.giveUpQueue()
			}
			return false
		case <-t.C:
		}
		wait = min(wait*2, maxWait)
	}
}

func (s *Sender) delivered(n int) {
	s.batches.Add(1)
	s.sent.Add(uint64(n))
	s.reg.sent.Add(uint64(n))
}

func (s *Sender) giveUp(n int) {
	s.failed.Add(uint64(n))
	s.reg.failed.Add(uint64(n))
}

var (
	errStatus   = errors.New("collector answered with an error status")
	errEncoding = errors.New("records could not be encoded as JSON")
)

// newClient is a sender's HTTP client: the default transport's settings,
// with a dialer that refuses the process's control endpoints (the gateway
// admin API, Caddy's admin endpoint) whatever the endpoint's name resolves
// to or redirects to.
func newClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = guard.Dialer(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Transport: tr}
}

func (s *Sender) post(body []byte, cfg Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, cfg.Method, cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "caddy-gateway-http-log")
	for k, v := range cfg.Headers {
		if http.CanonicalHeaderKey(k) == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBodyToDrain))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%w: %d", errStatus, resp.StatusCode)
	}
	return nil
}

// Interface guard
var _ records.Sink = (*Sender)(nil)
