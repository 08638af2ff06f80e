package traffic

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
)

// ResponseTransform is the response-transform plugin: it changes the
// headers of the response the client receives, when the response header is
// written (so the upstream's headers are there to remove or rename). The
// operations run in the order remove, rename, set, add; values may use the
// request's Caddy placeholders (package placeholders). What they expand to
// for one request is bounded (maxExpanded): a header past the bound is left
// out, and a warning logged (at most once a minute).
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile (map fields
// take one "key value" per line):
//
//	gateway_response_transform {
//	    remove_headers Server X-Powered-*
//	    rename_headers X-Upstream-Time X-Time
//	    set_headers Cache-Control no-store
//	    add_headers X-Served-By gateway
//	}
type ResponseTransform struct {
	HeaderTransform
}

// SetDefaults implements schema.Defaulter.
func (h *ResponseTransform) SetDefaults() { h.HeaderTransform.setDefaults() }

// CaddyModule returns the Caddy module information.
func (*ResponseTransform) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[ResponseTransform]("response-transform")
}

// Provision checks the config with the admin API's rules and prepares the
// header operations.
func (h *ResponseTransform) Provision(ctx caddy.Context) error {
	if err := h.HeaderTransform.provision(h); err != nil {
		return err
	}
	h.headers.leftOut = ctx.Logger().WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Minute, 1, 0)
	}))
	return nil
}

// Validate implements schema.Validator and caddy.Validator.
func (h *ResponseTransform) Validate() error {
	return h.HeaderTransform.check()
}

// ServeHTTP calls next with a response writer that transforms the header.
func (h *ResponseTransform) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if h.headers.empty() {
		return next.ServeHTTP(w, r)
	}
	// Under the gateway's proxy server: a hook of its writer (no wrapper,
	// nothing allocated).
	if rw, ok := w.(*gwctx.RecordingWriter); ok {
		args := gwctx.HookArgs{Repl: replacer(r), Vals: rw.Values(len(h.headers.staticSet))}
		if rw.OnHeader(h, args) {
			return next.ServeHTTP(w, r)
		}
	}
	// Wrapped by another plugin's writer, the transformed header is what
	// that writer sees: a proxy-cache around this plugin must not keep
	// this request's placeholder values for the next client (a cache hit
	// does not run this plugin again).
	if h.headers.placeholders {
		if info := gwctx.From(r); info != nil {
			info.Uncacheable = true
		}
	}
	hook := &transformHook{ops: h.headers, repl: replacer(r)}
	hook.ResponseWriter, hook.apply = w, hook
	return next.ServeHTTP(hook, r)
}

// ApplyHeader is the transform as a hook of the gateway's writer
// (gwctx.RecordingWriter.OnHeader).
func (h *ResponseTransform) ApplyHeader(hdr http.Header, args gwctx.HookArgs) {
	h.headers.apply(hdr, args.Repl, args.Vals)
}

// transformHook is a response's header hook and the state it needs, in
// one allocation (with room for the values of up to four headers set
// without placeholders).
type transformHook struct {
	headerHook
	ops  *headerOps
	repl *caddy.Replacer
	vals [4]string
}

func (t *transformHook) applyHeader(hdr http.Header) { t.ops.apply(hdr, t.repl, t.vals[:]) }

// Interface guards
var (
	_ plugins.Plugin   = (*ResponseTransform)(nil)
	_ gwctx.HeaderHook = (*ResponseTransform)(nil)
)
