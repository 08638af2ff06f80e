package gwctx

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/records"
)

// lastRecordID numbers request records for the whole process, whoever
// builds them (the gateway's proxy server, or http-log used on its own).
var lastRecordID atomic.Int64

// NextRecordID returns the next request record id (increasing).
func NextRecordID() int64 { return lastRecordID.Add(1) }

// The most bytes of a client-given string a record keeps: the path, and
// the method, host and user agent. A client without an account picks
// them up to the listener's 1 MB header limit, and records are kept (500
// recent ones, every event-stream subscriber's buffer, http-log queues of
// up to 10,000): whole, a burst of large requests would hold gigabytes.
const (
	MaxRecordPath  = 2048
	MaxRecordShort = 256
)

// bounded is s cut to at most n bytes at a UTF-8 boundary, copied when
// cut so the record does not keep the request's whole string alive.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

// NewRecord builds the record of a completed request: the one place where
// a record's fields are decided, so every sink (recent requests, the event
// stream, http-log) gets the same record. status and bytes are what the
// client got (RecordingWriter); a status of 0 falls back to Info.Status.
// The id is left to the caller, which decides the records' order.
func NewRecord(r *http.Request, info *Info, status int, bytes int64, end time.Time) *records.Record {
	if status == 0 {
		status = info.Status
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// The record and the values its optional fields point to are one
	// allocation.
	a := &recordAlloc{ip: ClientIP(r)}
	rc := &a.rec
	*rc = records.Record{
		Time:      end.UTC(),
		Method:    bounded(r.Method, MaxRecordShort),
		Scheme:    scheme,
		Host:      bounded(r.Host, MaxRecordShort),
		Path:      bounded(requestPath(r), MaxRecordPath),
		Status:    status,
		LatencyMS: float64(end.Sub(info.Start).Microseconds()) / 1000,
		BytesSent: bytes,
		ClientIP:  &a.ip,
	}
	if info.Matched {
		a.routeID, a.serviceID = info.RouteID, info.ServiceID
		rc.RouteID, rc.ServiceID = &a.routeID, &a.serviceID
	}
	if info.Target != "" {
		a.target = info.Target
		rc.Target = &a.target
	}
	if info.Consumer != nil {
		a.consumerID = info.Consumer.ID
		rc.ConsumerID = &a.consumerID
	}
	if a.userAgent = bounded(r.UserAgent(), MaxRecordShort); a.userAgent != "" {
		rc.UserAgent = &a.userAgent
	}
	if info.RequestID != "" {
		a.requestID = info.RequestID
		rc.RequestID = &a.requestID
	}
	if info.TraceID != "" {
		a.traceID, a.spanID = info.TraceID, info.SpanID
		rc.TraceID, rc.SpanID = &a.traceID, &a.spanID
	}
	rc.WAF = info.WAF
	if info.GRPC && info.GRPCStatus >= 0 {
		a.grpcStatus = info.GRPCStatus
		rc.GRPCStatus = &a.grpcStatus
	}
	return rc
}

// recordAlloc is a record with the storage of its pointer fields.
type recordAlloc struct {
	rec                              records.Record
	routeID, serviceID, consumerID   int64
	grpcStatus                       int
	ip, target, userAgent, requestID string
	traceID, spanID                  string
}

// requestPath is the path the client asked for (before strip_path and
// other rewrites).
func requestPath(r *http.Request) string {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return orig.URL.Path
	}
	return r.URL.Path
}

// RecordingWriter notes the status and body size of the response it passes
// through, for the request record. It keeps Caddy's wrapper underneath so
// Flush, Hijack (WebSockets) and ReadFrom still work.
//
// It also runs the response header hooks of the plugins that were handed
// this writer itself (OnHeader): a plugin that would otherwise wrap the
// writer only to change the header when it is written registers here
// instead, so a chain of such plugins costs no wrapper and no allocation
// per request.
type RecordingWriter struct {
	caddyhttp.ResponseWriterWrapper
	Status int   // the final status (a 1xx until a final one is written)
	Bytes  int64 // body bytes written

	// Sanitize, when set, edits the response header just before every
	// status line (1xx included) is written, after the hooks: what no
	// upstream or plugin may send (the proxy listener's
	// guard.DropAdminSetCookies).
	Sanitize func(http.Header)

	ext *writerHooks // allocated by the first plugin that uses it
}

// writerHooks are a RecordingWriter's header hooks and the storage of
// their plugins' header values: one allocation for a whole chain.
type writerHooks struct {
	hooks [3]hook
	n     int
	ran   bool       // the hooks ran (final or 101 status written)
	vals  [10]string // Values (request-id 2, consumers 4, rate-limit 3, response-transform 1)
	nvals int
}

// HeaderHook changes a response header just before its final (or 101)
// status line is written, with the arguments it was registered with.
type HeaderHook interface {
	ApplyHeader(hdr http.Header, args HookArgs)
}

// HookArgs are a hook's per-request values, kept by the writer.
type HookArgs struct {
	S    string          // a string (request-id: the id)
	Repl *caddy.Replacer // the request's replacer
	Vals []string        // storage for values the hook sets (Values)
}

type hook struct {
	h    HeaderHook
	args HookArgs
}

// NewRecordingWriter wraps w.
func NewRecordingWriter(w http.ResponseWriter) *RecordingWriter {
	return &RecordingWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
}

// OnHeader registers h to run when the response header is written, and
// reports whether it did (false when the header is already out or there
// is no room: the caller wraps the writer instead). Hooks run last
// registered first, as nested wrappers would: the hook of a plugin later
// in a chain sees the header first.
//
// Only a plugin handed this writer itself may register: a writer between
// them (another plugin's wrapper) would otherwise see the header before
// the hook instead of after it.
func (w *RecordingWriter) OnHeader(h HeaderHook, args HookArgs) bool {
	if w == nil || w.Status >= 200 {
		return false
	}
	x := w.hooksState()
	if x.ran || x.n == len(x.hooks) {
		return false
	}
	x.hooks[x.n] = hook{h, args}
	x.n++
	return true
}

func (w *RecordingWriter) hooksState() *writerHooks {
	if w.ext == nil {
		w.ext = new(writerHooks)
	}
	return w.ext
}

// pending reports hooks that have yet to run.
func (w *RecordingWriter) pending() bool { return w.ext != nil && w.ext.n > 0 && !w.ext.ran }

// Hooks is the number of hooks registered so far (see DropHooks).
func (w *RecordingWriter) Hooks() int {
	if w == nil || w.ext == nil {
		return 0
	}
	return w.ext.n
}

// DropHooks forgets the hooks registered after the first n: the router
// calls it when a plugin chain returns, so that what the gateway writes
// afterwards (its own error answers) is not changed by the chain's
// hooks, exactly as when the plugins wrapped the writer.
func (w *RecordingWriter) DropHooks(n int) {
	if w == nil || w.ext == nil {
		return
	}
	x := w.ext
	for i := n; i < x.n; i++ {
		x.hooks[i] = hook{}
	}
	x.n = min(x.n, n)
}

// Values returns n header values' storage for a hook's plugin: each a
// one-element slice whose capacity ends there (an append to one never
// writes into another), taken from the writer while it has room, else
// allocated.
func (w *RecordingWriter) Values(n int) []string {
	if w == nil || n > len(writerHooks{}.vals) {
		return make([]string, n)
	}
	x := w.hooksState()
	if x.nvals+n > len(x.vals) {
		return make([]string, n)
	}
	v := x.vals[x.nvals : x.nvals+n : x.nvals+n]
	x.nvals += n
	return v
}

// runHooks runs the registered hooks once, before a final or 101 status.
func (w *RecordingWriter) runHooks(code int) {
	if !w.pending() || (code < 200 && code != http.StatusSwitchingProtocols) {
		return
	}
	x := w.ext
	x.ran = true
	hdr := w.Header()
	for i := x.n - 1; i >= 0; i-- {
		x.hooks[i].h.ApplyHeader(hdr, x.hooks[i].args)
	}
}

// WriteHeader notes the first status, replaced by a final one after 1xx.
func (w *RecordingWriter) WriteHeader(code int) {
	w.runHooks(code)
	if w.Sanitize != nil {
		w.Sanitize(w.Header())
	}
	if w.Status == 0 || (w.Status < 200 && code >= 200) {
		w.Status = code
	}
	w.ResponseWriterWrapper.WriteHeader(code)
}

// Write counts the body.
func (w *RecordingWriter) Write(b []byte) (int, error) {
	w.implicitHeader()
	n, err := w.ResponseWriterWrapper.Write(b)
	w.Bytes += int64(n)
	return n, err
}

// ReadFrom counts the body copied by the wrapper's ReadFrom (sendfile).
func (w *RecordingWriter) ReadFrom(r io.Reader) (int64, error) {
	w.implicitHeader()
	n, err := w.ResponseWriterWrapper.ReadFrom(r)
	w.Bytes += n
	return n, err
}

// implicitHeader is net/http's 200 at the first body byte, written
// through WriteHeader when hooks or Sanitize must see the header first.
func (w *RecordingWriter) implicitHeader() {
	if w.Status < 200 && (w.pending() || w.Sanitize != nil) {
		w.WriteHeader(http.StatusOK)
	}
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
}

// FlushError implements the interface http.ResponseController looks for:
// a flush before any status writes a 200 header, the hooks' changes
// included.
func (w *RecordingWriter) FlushError() error {
	if w.Status < 200 && (w.pending() || w.Sanitize != nil) {
		w.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Interface guards
var (
	_ http.ResponseWriter = (*RecordingWriter)(nil)
	_ io.ReaderFrom       = (*RecordingWriter)(nil)
)
