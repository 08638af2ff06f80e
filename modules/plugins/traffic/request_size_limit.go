package traffic

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// RequestSizeLimit is the request-size-limit plugin: 413 for a request body
// over max_bytes, whether declared (Content-Length, refused before the
// upstream is contacted) or streamed (chunked: the body is cut off while
// the upstream reads it, the upstream sees a failed body, and the client gets
// 413 unless a response had already begun).
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_request_size_limit {
//	    max_bytes 10485760
//	}
type RequestSizeLimit struct {
	MaxBytes int64 `json:"max_bytes" schema:"min=0,max=1099511627776" doc:"Largest request body in bytes (0: no body allowed). Default 1048576."`
}

// SetDefaults implements schema.Defaulter.
func (h *RequestSizeLimit) SetDefaults() { h.MaxBytes = 1 << 20 }

// CaddyModule returns the Caddy module information.
func (*RequestSizeLimit) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[RequestSizeLimit]("request-size-limit")
}

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate).
func (h *RequestSizeLimit) Provision(caddy.Context) error { return schema.Check(h) }

// Validate implements caddy.Validator (the tags say everything).
func (h *RequestSizeLimit) Validate() error { return nil }

const tooLarge = "request body too large"

// ServeHTTP enforces the limit.
func (h *RequestSizeLimit) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.ContentLength > h.MaxBytes {
		r.Close = true // do not read the rest of an unwanted body
		gwctx.WriteError(w, http.StatusRequestEntityTooLarge, tooLarge)
		return nil
	}
	// a declared length within the limit is enforced by the server itself
	if r.ContentLength >= 0 || r.Body == nil || r.Body == http.NoBody {
		return next.ServeHTTP(w, r)
	}
	body := &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, h.MaxBytes)}
	r.Body = body
	var started atomic.Bool
	hw := newHeaderHook(w, func(http.Header) { started.Store(true) })
	err := next.ServeHTTP(hw, r)
	if body.exceeded.Load() && !started.Load() {
		r.Close = true
		gwctx.WriteError(w, http.StatusRequestEntityTooLarge, tooLarge)
		return nil
	}
	return err
}

// limitedBody notes when the limit cut the body off (the read may happen
// on the proxy transport's goroutine).
type limitedBody struct {
	io.ReadCloser
	exceeded atomic.Bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		b.exceeded.Store(true)
		err = caddyhttp.Error(http.StatusRequestEntityTooLarge, err)
	}
	return n, err
}

// Interface guards
var (
	_ plugins.Plugin = (*RequestSizeLimit)(nil)
)
