package gwctx

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// gRPC status codes the gateway answers with.
const (
	GRPCOK                 = 0
	GRPCCancelled          = 1
	GRPCUnknown            = 2
	GRPCInvalidArgument    = 3
	GRPCDeadlineExceeded   = 4
	GRPCPermissionDenied   = 7
	GRPCResourceExhausted  = 8
	GRPCUnimplemented      = 12
	GRPCInternal           = 13
	GRPCUnavailable        = 14
	GRPCUnauthenticated    = 16
	grpcMessageMax         = 1024 // bytes of an answer's message kept (before encoding)
	grpcAnswerBodyMax      = 4096 // bytes of an answer's JSON body read for its message
	grpcContentTypeDefault = "application/grpc"
)

// GRPCCode is the gRPC status of an HTTP status the gateway answers a gRPC
// call with (docs/grpc.md lists the mapping).
func GRPCCode(status int) int {
	switch status {
	case http.StatusBadRequest:
		return GRPCInvalidArgument
	case http.StatusUnauthorized:
		return GRPCUnauthenticated
	case http.StatusForbidden:
		return GRPCPermissionDenied
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return GRPCUnimplemented
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return GRPCDeadlineExceeded
	case http.StatusTooManyRequests, http.StatusRequestEntityTooLarge:
		return GRPCResourceExhausted
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return GRPCUnavailable
	case 499:
		return GRPCCancelled
	}
	if status >= 500 {
		return GRPCInternal
	}
	return GRPCUnknown
}

// IsGRPCContentType reports whether ct is application/grpc or one of its
// variants (application/grpc+proto, application/grpc-web-text …).
func IsGRPCContentType(ct string) bool {
	const p = "application/grpc"
	if len(ct) < len(p) || !strings.EqualFold(ct[:len(p)], p) {
		return false
	}
	if len(ct) == len(p) {
		return true
	}
	switch ct[len(p)] {
	case '+', '-', ';', ' ':
		return true
	}
	return false
}

// GRPCWriter turns every answer the gateway makes itself to a gRPC call
// (a plugin's 401 or 429, the router's 404, the proxy's 502/503/504) into
// a trailers-only gRPC response: HTTP 200 with grpc-status and
// grpc-message, no body. A gRPC client reports an HTTP error status or a
// JSON body as a protocol error, not as the status the gateway meant.
// The target's responses (Info.Upstream) and answers already in gRPC pass
// through. The writer above it (RecordingWriter) keeps the status the
// gateway meant for the request record.
type GRPCWriter struct {
	http.ResponseWriter
	info   *Info
	ct     string // the call's content type
	own    bool   // the answer is the gateway's own, held back until Finish
	passed bool   // the header went through unchanged
	status int
	body   []byte
}

// NewGRPCWriter wraps w for a gRPC call with content type ct.
func NewGRPCWriter(w http.ResponseWriter, info *Info, ct string) *GRPCWriter {
	return &GRPCWriter{ResponseWriter: w, info: info, ct: ct}
}

// WriteHeader passes the target's and gRPC answers on and holds back the
// gateway's own.
func (w *GRPCWriter) WriteHeader(code int) {
	if w.own || w.passed {
		if w.passed {
			w.ResponseWriter.WriteHeader(code)
		}
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.info.Upstream || IsGRPCContentType(w.Header().Get("Content-Type")) {
		w.passed = true
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.own, w.status = true, code
}

// Write passes the body of a passed answer on; an own answer's is read for
// its message.
func (w *GRPCWriter) Write(b []byte) (int, error) {
	if !w.own && !w.passed {
		w.WriteHeader(http.StatusOK)
	}
	if w.own {
		if room := grpcAnswerBodyMax - len(w.body); room > 0 {
			w.body = append(w.body, b[:min(len(b), room)]...)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// FlushError flushes a passed answer; an own answer waits for Finish.
func (w *GRPCWriter) FlushError() error {
	if w.own {
		return nil
	}
	if !w.passed {
		w.WriteHeader(http.StatusOK)
		if w.own {
			return nil
		}
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap is for http.ResponseController.
func (w *GRPCWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Own reports whether the answer was the gateway's own (converted).
func (w *GRPCWriter) Own() bool { return w.own }

// Finish writes a held-back answer as a trailers-only gRPC response and
// returns the call's gRPC status: the converted one, else the one the
// target sent (in its header or trailers), else -1.
func (w *GRPCWriter) Finish() int {
	if !w.own {
		hdr := w.Header()
		v := hdr.Get("Grpc-Status")
		if v == "" {
			v = hdr.Get(http.TrailerPrefix + "Grpc-Status")
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n
		}
		return -1
	}
	code := GRPCCode(w.status)
	msg := http.StatusText(w.status)
	var answer struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(w.body, &answer) == nil && answer.Error != "" {
		msg = answer.Error
	}
	hdr := w.Header()
	for _, k := range []string{"Content-Length", "Content-Encoding", "Transfer-Encoding", "Trailer", "Location"} {
		delete(hdr, k)
	}
	ct := grpcContentTypeDefault
	if strings.HasPrefix(strings.ToLower(w.ct), "application/grpc-web") {
		ct = w.ct // a gRPC-Web client reads the status from the header too
	}
	hdr.Set("Content-Type", ct)
	hdr.Set("Grpc-Status", strconv.Itoa(code))
	hdr.Set("Grpc-Message", EncodeGRPCMessage(msg))
	w.ResponseWriter.WriteHeader(http.StatusOK)
	return code
}

// EncodeGRPCMessage percent-encodes a grpc-message value (bytes outside
// printable ASCII, and %), cut to a bounded length.
func EncodeGRPCMessage(msg string) string {
	if len(msg) > grpcMessageMax {
		msg = msg[:grpcMessageMax]
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// Interface guards
var _ http.ResponseWriter = (*GRPCWriter)(nil)
