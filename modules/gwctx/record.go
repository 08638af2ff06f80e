package gwctx

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/modules/records"
)

// lastRecordID numbers request records for the whole process, whoever
// builds them (the gateway's proxy server, or http-log used on its own).
var lastRecordID atomic.Int64

// NextRecordID returns the next request record id (increasing).
func NextRecordID() int64 { return lastRecordID.Add(1) }

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
		Method:    r.Method,
		Scheme:    scheme,
		Host:      r.Host,
		Path:      requestPath(r),
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
	if a.userAgent = r.UserAgent(); a.userAgent != "" {
		rc.UserAgent = &a.userAgent
	}
	if info.RequestID != "" {
		a.requestID = info.RequestID
		rc.RequestID = &a.requestID
	}
	return rc
}

// recordAlloc is a record with the storage of its pointer fields.
type recordAlloc struct {
	rec                              records.Record
	routeID, serviceID, consumerID   int64
	ip, target, userAgent, requestID string
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
type RecordingWriter struct {
	caddyhttp.ResponseWriterWrapper
	Status int   // the final status (a 1xx until a final one is written)
	Bytes  int64 // body bytes written
}

// NewRecordingWriter wraps w.
func NewRecordingWriter(w http.ResponseWriter) *RecordingWriter {
	return &RecordingWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
}

// WriteHeader notes the first status, replaced by a final one after 1xx.
func (w *RecordingWriter) WriteHeader(code int) {
	if w.Status == 0 || (w.Status < 200 && code >= 200) {
		w.Status = code
	}
	w.ResponseWriterWrapper.WriteHeader(code)
}

// Write counts the body.
func (w *RecordingWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	n, err := w.ResponseWriterWrapper.Write(b)
	w.Bytes += int64(n)
	return n, err
}

// ReadFrom counts the body copied by the wrapper's ReadFrom (sendfile).
func (w *RecordingWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	n, err := w.ResponseWriterWrapper.ReadFrom(r)
	w.Bytes += n
	return n, err
}

// Interface guards
var (
	_ http.ResponseWriter = (*RecordingWriter)(nil)
	_ io.ReaderFrom       = (*RecordingWriter)(nil)
)
