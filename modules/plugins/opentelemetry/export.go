package opentelemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/caddy-gateway/gateway/internal/guard"
)

// The export's bounds: spans wait in a queue (the plugin's queue_size) per
// exporter and go out in batches of up to BatchSize, at least every
// FlushInterval; one export may take ExportTimeout. A span that finds the
// queue full is dropped and counted: the request that ended it never
// waits.
const (
	BatchSize     = 512
	FlushInterval = time.Second
	ExportTimeout = 10 * time.Second
	// drainTimeout bounds the last export of an exporter no config uses
	// any more (and of every exporter when the process exits).
	drainTimeout = 5 * time.Second
)

// Counts of spans over the process's life, every exporter together
// (the gateway's /metrics shows them).
var (
	exportedSpans atomic.Uint64
	droppedQueue  atomic.Uint64 // the queue was full, or the exporter had stopped
	droppedExport atomic.Uint64 // the collector did not take the batch (down, slow, refused)
)

// Stats are the process's span counts.
type Stats struct {
	Exported, DroppedQueueFull, DroppedExportFailed uint64
}

// Counts returns the process's span counts.
func Counts() Stats {
	return Stats{exportedSpans.Load(), droppedQueue.Load(), droppedExport.Load()}
}

// exporters are the batching exporters by destination (endpoint and
// headers) and queue size. They outlive config reloads: every admin API change loads a
// fresh config, and an exporter that started over each time would lose
// its queue. Provision acquires, Cleanup releases; the last release of an
// exporter sends what it has queued (bounded) and stops it.
var exporters = caddy.NewUsagePool()

// exporterKey identifies a destination: the endpoint and the headers (a
// hash: the headers are secrets and the key lives in memory only).
func exporterKey(endpoint string, headers map[string]string, queueSize int) string {
	b, _ := json.Marshal(struct {
		E string
		H map[string]string
		Q int
	}{endpoint, headers, queueSize})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// acquireExporter returns the running exporter of the destination,
// starting it if no config uses it yet. The caller releases it with
// releaseExporter.
func acquireExporter(endpoint string, headers map[string]string, queueSize int) (*batcher, string, error) {
	key := exporterKey(endpoint, headers, queueSize)
	v, _, err := exporters.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newBatcher(endpoint, headers, queueSize)
	})
	if err != nil {
		return nil, "", err
	}
	return v.(*batcher), key, nil
}

func releaseExporter(key string) {
	if key != "" {
		_, _ = exporters.Delete(key)
	}
}

// batcher is a span processor: ended, sampled spans go into a bounded
// queue that one goroutine exports in batches over OTLP/HTTP (protobuf).
// It is shared by the trace providers of every plugin instance with the
// same destination.
type batcher struct {
	exp   *otlptrace.Exporter
	queue chan sdktrace.ReadOnlySpan
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// stopped is set once the worker no longer takes spans: later ones
	// are dropped and counted.
	stopped atomic.Bool
}

func newBatcher(endpoint string, headers map[string]string, queueSize int) (*batcher, error) {
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithHeaders(headers),
		otlptracehttp.WithHTTPClient(newClient()),
		otlptracehttp.WithTimeout(ExportTimeout),
		// No retries: a failed batch is dropped and counted, and the
		// queue behind it moves on (retries would hold the worker for
		// up to a minute while the queue overflows anyway).
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	)
	if err != nil {
		return nil, fmt.Errorf("opentelemetry exporter: %w", err)
	}
	b := &batcher{
		exp:   exp,
		queue: make(chan sdktrace.ReadOnlySpan, queueSize),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go b.run()
	return b, nil
}

// newClient is an exporter's HTTP client: the default transport's
// settings, dialing through the guard that keeps connections off the
// gateway's and Caddy's admin endpoints (the endpoint's name is checked
// again once resolved).
func newClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = guard.Dialer(&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Transport: tr}
}

// OnStart implements sdktrace.SpanProcessor.
func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor: the span is queued, or dropped
// and counted when the queue is full. It never blocks.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if b.stopped.Load() {
		droppedQueue.Add(1)
		return
	}
	select {
	case b.queue <- s:
	default:
		droppedQueue.Add(1)
	}
}

// Shutdown implements sdktrace.SpanProcessor. The trace providers never
// call it (they are never shut down: the batcher is shared); the pool's
// Destruct stops the batcher.
func (b *batcher) Shutdown(context.Context) error { return nil }

// ForceFlush implements sdktrace.SpanProcessor (nothing is forced: the
// worker sends at least every FlushInterval).
func (b *batcher) ForceFlush(context.Context) error { return nil }

// Destruct implements caddy.Destructor: the last config using the
// exporter is gone. What is queued is sent once (bounded by drainTimeout)
// in the background, so the config change does not wait for the
// collector.
func (b *batcher) Destruct() error {
	b.once.Do(func() { close(b.stop) })
	return nil
}

// run exports batches until stopped, then sends what is left once.
func (b *batcher) run() {
	defer close(b.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, BatchSize)
	tick := time.NewTicker(FlushInterval)
	defer tick.Stop()
	for {
		select {
		case s := <-b.queue:
			batch = append(batch, s)
			if len(batch) >= BatchSize {
				batch = b.export(batch, ExportTimeout)
			}
		case <-tick.C:
			if len(batch) > 0 {
				batch = b.export(batch, ExportTimeout)
			}
		case <-b.stop:
			b.drain(batch)
			return
		}
	}
}

// drain sends what is queued within drainTimeout, then stops the
// exporter; spans ended after it are dropped and counted.
func (b *batcher) drain(batch []sdktrace.ReadOnlySpan) {
	deadline := time.Now().Add(drainTimeout)
	b.stopped.Store(true)
	for {
		for len(batch) < BatchSize {
			select {
			case s := <-b.queue:
				batch = append(batch, s)
				continue
			default:
			}
			break
		}
		if len(batch) == 0 {
			break
		}
		left := time.Until(deadline)
		if left <= 0 {
			droppedExport.Add(uint64(len(batch)))
			batch = batch[:0]
			continue // count the rest of the queue as dropped too
		}
		batch = b.export(batch, left)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = b.exp.Shutdown(ctx)
}

// export sends one batch and returns the emptied slice.
func (b *batcher) export(batch []sdktrace.ReadOnlySpan, timeout time.Duration) []sdktrace.ReadOnlySpan {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := b.exp.ExportSpans(ctx, batch)
	cancel()
	if err != nil {
		droppedExport.Add(uint64(len(batch)))
	} else {
		exportedSpans.Add(uint64(len(batch)))
	}
	clear(batch) // the spans may be collected
	return batch[:0]
}

// shutdownAll stops every exporter, each sending what it has queued
// (process exit).
func shutdownAll(ctx context.Context) {
	var running []*batcher
	exporters.Range(func(_, v any) bool {
		running = append(running, v.(*batcher))
		return true
	})
	for _, b := range running {
		_ = b.Destruct()
	}
	for _, b := range running {
		select {
		case <-b.done:
		case <-ctx.Done():
			return
		}
	}
}

// Interface guards
var (
	_ sdktrace.SpanProcessor = (*batcher)(nil)
	_ caddy.Destructor       = (*batcher)(nil)
)

// RunningExporters is the number of exporters some config uses.
func RunningExporters() int {
	n := 0
	exporters.Range(func(_, _ any) bool { n++; return true })
	return n
}
