// Package proxybench holds what the in-process proxy benchmarks share
// (modules/router's BenchmarkChain, app/tests' BenchmarkProxyPath): the
// request wrk sends, a reusable response writer, and CPU time per request,
// the figure that compares variants on a machine shared with other work
// (wall time per operation moves with the load, CPU time much less).
// Benchmark support only: the benchmarks that use it are its tests.
package proxybench

import (
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"
)

// Request is a GET of path as bench/proxy.sh's wrk sends it (with the
// key-auth key of its chain), as a server hands it to its handler.
func Request(host, path string) *http.Request {
	return &http.Request{
		Method: "GET", URL: &url.URL{Path: path}, RequestURI: path,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Host: host, RemoteAddr: "127.0.0.1:40000",
		Header: http.Header{"Apikey": {"bench-key"}, "User-Agent": {"wrk"}},
	}
}

// Writer is a response writer that keeps the status and drops the body,
// reused across requests (Reset).
type Writer struct {
	header http.Header
	Status int
}

// Reset empties the writer for the next request.
func (w *Writer) Reset() {
	if w.header == nil {
		w.header = http.Header{}
	}
	clear(w.header)
	w.Status = 0
}

// Header implements http.ResponseWriter.
func (w *Writer) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

// WriteHeader notes the first status.
func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
}

// Write drops the body.
func (w *Writer) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return len(p), nil
}

// CPU is the user and system CPU time the process has used so far.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Run runs serve b.N times, reporting allocations and the process's CPU
// time per request as cpu-ns/op (garbage collection and every goroutine
// of the process included).
func Run(b *testing.B, serve func()) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	start := CPU()
	for i := 0; i < b.N; i++ {
		serve()
	}
	b.StopTimer()
	b.ReportMetric(float64(CPU()-start)/float64(b.N), "cpu-ns/op")
}
