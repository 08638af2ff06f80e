package gwproxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/net/http2"

	"github.com/caddy-gateway/gateway/internal/gwctx"
)

// GRPC holds the settings of a proxy whose targets are gRPC servers
// (services of protocol grpc or grpcs).
type GRPC struct {
	// MaxTimeout caps the deadline a call asks for (grpc-timeout): a
	// longer one is forwarded as MaxTimeout, and the proxy ends the call
	// at its deadline (DEADLINE_EXCEEDED). A call without grpc-timeout
	// has no deadline (long-lived streams). 0: no cap.
	MaxTimeout caddy.Duration `json:"max_timeout,omitempty"`
}

// IsGRPCRequest reports whether r is a gRPC call (a content type of
// application/grpc, +proto, +json, or gRPC-Web's application/grpc-web*).
func IsGRPCRequest(r *http.Request) bool {
	return gwctx.IsGRPCContentType(r.Header.Get("Content-Type"))
}

// maxGRPCTimeout is the longest deadline grpc-timeout can express that
// the proxy honours (8 digits of hours is longer than any timer).
const maxGRPCTimeout = 100000 * time.Hour

// ParseGRPCTimeout reads a grpc-timeout value: at most 8 digits and a
// unit (H, M, S, m, u, n).
func ParseGRPCTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if time.Duration(n) > maxGRPCTimeout/unit {
		return maxGRPCTimeout, true
	}
	return time.Duration(n) * unit, true
}

// FormatGRPCTimeout writes d as a grpc-timeout value (milliseconds,
// rounded up, so the target's deadline is never before the proxy's).
func FormatGRPCTimeout(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms < 1 {
		ms = 1
	}
	return strconv.FormatInt(int64(ms), 10) + "m"
}

// deadline applies a gRPC call's deadline: grpc-timeout, capped by
// MaxTimeout. The cap is what the target is told, and the call's context
// ends at it; cancel must be called when the call is done.
func (g *GRPC) deadline(r *http.Request) (*http.Request, context.CancelFunc) {
	v := r.Header.Get("Grpc-Timeout")
	if v == "" {
		return r, nil
	}
	d, ok := ParseGRPCTimeout(v)
	if !ok {
		// not a deadline: the target would refuse it, so do not pass it
		r.Header.Del("Grpc-Timeout")
		return r, nil
	}
	if limit := time.Duration(g.MaxTimeout); limit > 0 && d > limit {
		d = limit
		r.Header.Set("Grpc-Timeout", FormatGRPCTimeout(d))
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return r.WithContext(ctx), cancel
}

// streamReset reports whether err ended one HTTP/2 stream, not the
// connection: the target (or the proxy's transport) reset that call, as
// gRPC servers do with the calls whose deadline passed. Such a call is
// not the target's failure.
func streamReset(err error) bool {
	var se http2.StreamError
	if errors.As(err, &se) {
		return true
	}
	// net/http's own HTTP/2 (unencrypted HTTP/2) has its own copy of the
	// type, unexported: its message is the same.
	return strings.Contains(err.Error(), "stream error: stream ID ")
}

// grpcStatusTrailer ends a gRPC call the proxy cannot finish (the target's
// response broke off, or the call's deadline passed mid-response) with a
// status in the trailers, as a gRPC server would, instead of resetting the
// client's stream.
func grpcStatusTrailer(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set(http.TrailerPrefix+"Grpc-Status", strconv.Itoa(code))
	h.Set(http.TrailerPrefix+"Grpc-Message", msg)
}
