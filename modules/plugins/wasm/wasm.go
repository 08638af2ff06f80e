// Package wasm holds the gateway's wasm plugin type: an HTTP filter written
// against the proxy-wasm ABI (0.2.0 / 0.2.1), run by the host in
// internal/wasm/proxywasm. Module bytes reach the handler by reference (the
// content hash of bytes the gateway registered), never through Caddy's JSON
// config.
package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

func init() {
	plugins.Register(plugins.Type{Name: "wasm", Ordering: 1200, Doc: "Runs an uploaded proxy-wasm (ABI 0.2.0/0.2.1) HTTP filter module on every request: header and body callbacks, local responses; a module that traps, times out or exhausts its memory fails only that request (500).", New: func() plugins.Plugin { return new(Wasm) }})
}

// Limits of the handler.
const (
	// maxModuleFile bounds a module_file (the admin API's upload limit).
	maxModuleFile = 16 << 20
	// maxBodyBytes bounds a request or response body buffered for a
	// module's body callback.
	maxBodyBytes = 1 << 20
)

// Wasm is the wasm plugin.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile (config is
// parsed as JSON when it is valid JSON, else taken as a string):
//
//	gateway_wasm {
//	    module      my-filter
//	    module_file /etc/caddy/my-filter.wasm
//	    config      `{"deny": ["/admin"]}`
//	}
type Wasm struct {
	Module string          `json:"module" schema:"required,minLength=1,maxLength=64" doc:"Name of an uploaded WASM module (1 to 64 of a-z 0-9 - _): a proxy-wasm 0.2.0 or 0.2.1 HTTP filter. Its request and response header callbacks (and body callbacks, bodies up to 1 MiB; a response body of unknown length — chunked, an event stream — is handed to the response body callback as it comes, at every flush with end_of_stream false, what the module pauses on held for the next call up to 1 MiB, as proxy-wasm hosts do; a body of known length comes whole) run for every request; a local response it sends answers the client without calling the upstream. A module that traps, runs longer than 500 ms in a callback or exhausts its memory (64 MiB per instance; all instances together at most the gateway's wasm_memory_limit, default 1 GiB) fails only that request, with 500; a request that needs a new instance while that limit has no room is 503. The plugins of one module share its proxy-wasm shared data (at most 64 MiB), kept across changes while a plugin of the module exists and freed with the last one. Outside its requests a module is bounded too: it ticks at most every 100 ms (a shorter proxy_set_tick_period_milliseconds is raised to it), a tick waits at least nine times as long as the last one ran and at most a quarter of the CPUs run ticks at once, so ticks never take the CPUs requests need; the plugins of one module write at most 100 log entries and 64 KiB a second to the gateway's log (requests and ticks together; an entry is cut at 4 KiB and says so), beyond which entries are dropped and one warning a second says how many."`
	Config json.RawMessage `json:"config" schema:"nullable,secret" doc:"The plugin configuration handed to the module (proxy_on_configure, PLUGIN_CONFIGURATION buffer): a JSON string is handed as its text, any other JSON value as its compact JSON encoding, null as empty. A secret as a whole (the gateway cannot tell which of its values are keys or tokens): viewers and exports without secrets see \"<redacted>\". At most 1 MiB of compact JSON (a larger one stored by an older version still loads; its next change must be smaller). A module that rejects it (proxy_on_configure returns false) fails the change."`

	// ModuleSHA256 is set by the gateway's config compiler: the hex sha256 of
	// the module's bytes, which the gateway registered with
	// proxywasm.PutSource (bytes never travel through Caddy's config).
	ModuleSHA256 string `json:"module_sha256,omitempty" schema:"internal"`
	// ModuleFile is for plain Caddy configs and Caddyfiles without the
	// gateway's store: a .wasm file read at Provision. Not part of the
	// admin API (an editor must not make the gateway read files).
	ModuleFile string `json:"module_file,omitempty" schema:"internal"`
	// CallTimeoutMS overrides the time limit of one callback (default 500).
	CallTimeoutMS int64 `json:"call_timeout_ms,omitempty" schema:"internal"`

	plugin *proxywasm.Plugin
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (*Wasm) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[Wasm]("wasm") }

// Provision starts the module: it compiles it (once per content, shared by
// every plugin using it and kept across reloads), starts one VM and runs
// proxy_on_configure with the plugin configuration. A module that cannot
// start or rejects its configuration fails the config load.
func (h *Wasm) Provision(ctx caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	h.logger = ctx.Logger(h).Named(h.Module)
	wasm, err := h.moduleBytes()
	if err != nil {
		return err
	}
	m, err := proxywasm.Compile(ctx, wasm)
	if err != nil {
		return fmt.Errorf("wasm module %q: %w", h.Module, err)
	}
	defer m.Release()
	if !m.Bounded {
		// not an error: the module runs with a watchdog per callback,
		// which costs a goroutine per call (see bench/README.md)
		h.logger.Debug("wasm module runs with a watchdog", zap.String("module", h.Module), zap.String("reason", m.Unbounded))
	}
	p, err := proxywasm.NewPlugin(ctx, m, proxywasm.PluginConfig{
		Name:          h.Module,
		VMID:          h.Module,
		Configuration: h.configuration(),
		Logger:        h.logger,
		CallTimeout:   time.Duration(h.CallTimeoutMS) * time.Millisecond,
	})
	if err != nil {
		return fmt.Errorf("wasm module %q: %w", h.Module, err)
	}
	h.plugin = p
	return nil
}

func (h *Wasm) moduleBytes() ([]byte, error) {
	switch {
	case h.ModuleSHA256 != "":
		b, ok := proxywasm.Source(h.ModuleSHA256)
		if !ok {
			return nil, fmt.Errorf("wasm module %q: its bytes (sha256 %s) are not loaded", h.Module, h.ModuleSHA256)
		}
		return b, nil
	case h.ModuleFile != "":
		f, err := os.Open(h.ModuleFile)
		if err != nil {
			return nil, fmt.Errorf("wasm module %q: %w", h.Module, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxModuleFile+1))
		if err != nil {
			return nil, fmt.Errorf("wasm module %q: reading %s: %w", h.Module, h.ModuleFile, err)
		}
		if len(b) > maxModuleFile {
			return nil, fmt.Errorf("wasm module %q: %s is larger than %d bytes", h.Module, h.ModuleFile, maxModuleFile)
		}
		return b, nil
	}
	return nil, schema.Errorf("module", "wasm module %q is not available (no uploaded module of that name)", h.Module)
}

// configuration is the plugin configuration the module reads: a JSON
// string's text, else the compact JSON.
func (h *Wasm) configuration() []byte {
	raw := bytes.TrimSpace(h.Config)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

// MaxConfigBytes bounds config (compact JSON) for new configs: it is
// stored in the plugin's row and carried by every compiled configuration,
// answer and export, so a 19 MiB config made every later change of any
// route cost 0.8 s and 300 MB, and every GET /api/v1/plugins 0.4 s.
// proxy-wasm filters take small JSON configurations; 1 MiB is the bound
// of a request-termination body.
const MaxConfigBytes = 1 << 20

// ValidateInput implements plugins.InputValidator: the config's size.
func (h *Wasm) ValidateInput() error {
	n := len(h.Config)
	var buf bytes.Buffer
	if json.Compact(&buf, h.Config) == nil {
		n = buf.Len()
	}
	if n > MaxConfigBytes {
		return schema.Errorf("config", "must be at most %d bytes of JSON (compact); it has %d", MaxConfigBytes, n)
	}
	return nil
}

// Validate implements caddy.Validator and schema.Validator.
func (h *Wasm) Validate() error {
	if !validName(h.Module) {
		return schema.Errorf("module", "must be 1 to 64 of a-z 0-9 - _")
	}
	if len(h.Config) > 0 && !json.Valid(h.Config) {
		return schema.Errorf("config", "must be JSON")
	}
	if h.ModuleSHA256 != "" && (len(h.ModuleSHA256) != 64 || !isHex(h.ModuleSHA256)) {
		return schema.Errorf("module_sha256", "must be a hex sha256")
	}
	if h.CallTimeoutMS < 0 || h.CallTimeoutMS > 60000 {
		return schema.Errorf("call_timeout_ms", "must be 0 to 60000")
	}
	return nil
}

func validName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Cleanup stops the plugin's instances and releases the module.
func (h *Wasm) Cleanup() error {
	if h.plugin != nil {
		h.plugin.Close()
	}
	return nil
}

// ServeHTTP runs the module's callbacks around the rest of the chain.
func (h *Wasm) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	in, err := h.plugin.Get(r.Context())
	if err != nil {
		switch {
		case errors.Is(err, proxywasm.ErrBusy):
			gwctx.WriteError(w, http.StatusServiceUnavailable, "wasm plugin busy")
			return nil
		case errors.Is(err, proxywasm.ErrMemory):
			h.logger.Warn("no wasm instance started: the memory limit is reached", zap.Error(err))
			gwctx.WriteError(w, http.StatusServiceUnavailable, "wasm memory limit reached")
			return nil
		}
		h.fail(w, err)
		return nil
	}
	// one allocation for the request's state (stream, exchange, response
	// hook)
	s := &stream{h: h, in: in}
	s.ex = &s.exchange
	s.ex.Request = r
	if info := gwctx.From(r); info != nil {
		s.ex.RequestID = info.RequestID
	}
	defer s.end()

	if err := in.Begin(s.ex); err != nil {
		s.fail(w, err)
		return nil
	}
	if !s.requestPhase(w) {
		return nil
	}
	s.wrapper.ResponseWriter = w
	s.hook = responseHook{ResponseWriterWrapper: &s.wrapper, s: s, buffer: in.WantsResponseBody()}
	rw := &s.hook
	err = next.ServeHTTP(rw, r)
	rw.finish()
	return err
}

// stream is one request through the module.
type stream struct {
	h      *Wasm
	in     *proxywasm.Instance
	ex     *proxywasm.Exchange // &exchange
	failed bool                // a failure was answered and logged

	exchange proxywasm.Exchange
	hook     responseHook
	wrapper  caddyhttp.ResponseWriterWrapper
}

// requestPhase runs the request callbacks; false when the response is
// already answered (local response, failure).
func (s *stream) requestPhase(w http.ResponseWriter) bool {
	r := s.ex.Request
	hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	if _, err := s.in.OnRequestHeaders(!hasBody); err != nil {
		s.fail(w, err)
		return false
	}
	if s.answered(w) {
		return false
	}
	// Trailers follow the body: a module with a trailers callback has the
	// body read (buffered) to reach them.
	if hasBody && (s.in.WantsRequestBody() || s.in.WantsRequestTrailers()) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
		if err != nil {
			gwctx.WriteError(w, http.StatusBadRequest, "reading the request body failed")
			return false
		}
		if len(body) > maxBodyBytes {
			gwctx.WriteError(w, http.StatusRequestEntityTooLarge, "request body too large for the wasm plugin")
			return false
		}
		s.ex.RequestBody = body
		if _, err := s.in.OnRequestBody(len(r.Trailer) == 0); err != nil {
			s.fail(w, err)
			return false
		}
		if s.answered(w) {
			return false
		}
		if len(r.Trailer) > 0 && s.in.WantsRequestTrailers() {
			s.ex.RequestTrailer = r.Trailer
			if _, err := s.in.OnRequestTrailers(); err != nil {
				s.fail(w, err)
				return false
			}
			if s.answered(w) {
				return false
			}
			r.Trailer = s.ex.RequestTrailer
		}
		r.Body = io.NopCloser(bytes.NewReader(s.ex.RequestBody))
		r.ContentLength = int64(len(s.ex.RequestBody))
		r.TransferEncoding = nil
		r.Header.Set("Content-Length", strconv.Itoa(len(s.ex.RequestBody)))
	}
	return true
}

// answered writes the module's local response (or the refusal of a closed
// stream) when there is one.
func (s *stream) answered(w http.ResponseWriter) bool {
	if l := s.ex.Local; l != nil {
		writeLocal(w, l)
		return true
	}
	if s.ex.Closed {
		gwctx.WriteError(w, http.StatusBadGateway, "request closed by the wasm plugin")
		return true
	}
	return false
}

func writeLocal(w http.ResponseWriter, l *proxywasm.LocalResponse) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	for k, v := range l.Header {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(len(l.Body)))
	w.WriteHeader(l.Status)
	_, _ = w.Write(l.Body)
}

// end finishes the stream context and returns (or discards) the instance.
func (s *stream) end() {
	if err := s.in.End(); err != nil && !s.failed {
		s.h.logger.Error("wasm plugin failed at the end of a request", zap.String("module", s.h.Module), zap.Error(err))
	}
	s.h.plugin.Put(s.in)
}

// fail answers 500 when a callback failed (trap, timeout, memory): the
// instance is discarded by Put.
func (s *stream) fail(w http.ResponseWriter, err error) {
	s.failed = true
	s.h.fail(w, err)
}

func (h *Wasm) fail(w http.ResponseWriter, err error) {
	h.logger.Error("wasm plugin failed; request answered 500", zap.String("module", h.Module), zap.Error(err))
	gwctx.WriteError(w, http.StatusInternalServerError, "wasm plugin failed")
}

// responseHook runs the response callbacks before the response headers are
// written (and, when the module has a body callback, buffers the body).
type responseHook struct {
	*caddyhttp.ResponseWriterWrapper
	s      *stream
	buffer bool

	started  bool // response headers seen
	swallow  bool // the response is replaced: drop what the upstream writes
	status   int
	body     bytes.Buffer
	tooBig   bool
	streamed bool // a body of unknown length (unbounded): the body callback runs at every flush
}

func (w *responseHook) WriteHeader(status int) {
	if w.started || w.swallow {
		return
	}
	if status < 200 && status != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(status) // informational: passed through
		return
	}
	w.started = true
	ex := w.s.ex
	ex.ResponseStatus = status
	ex.ResponseHeader = w.Header()
	if _, err := w.s.in.OnResponseHeaders(false); err != nil {
		w.swallow = true
		w.s.fail(w.ResponseWriter, err)
		return
	}
	if w.s.answered(w.ResponseWriter) {
		w.swallow = true
		return
	}
	if w.buffer && status != http.StatusSwitchingProtocols {
		if !unbounded(w.Header()) {
			w.status = ex.ResponseStatus
			return
		}
		// A body of unknown length may never end (an event stream, a
		// chunked log or watch stream): it is handed to the module as it
		// comes (streamBody), chunk by chunk as proxy-wasm hosts do, and
		// the header goes out now.
		w.streamed = true
		w.Header().Del("Content-Length")
	}
	w.ResponseWriter.WriteHeader(ex.ResponseStatus)
}

// streamBody runs the body callback on a streamed body received
// since the last call, at a flush (end false) or at the end, and writes
// what the module leaves; a module that pauses keeps the body for the
// next call. After a failure the rest is dropped and errStreamFailed
// aborts the response, whose header is already out.
func (w *responseHook) streamBody(end bool) error {
	if w.swallow {
		return errStreamFailed
	}
	if w.body.Len() == 0 && !end {
		return nil
	}
	if w.tooBig {
		w.swallow = true
		w.s.failed = true
		w.s.h.logger.Error("streamed response held back by the wasm plugin past 1 MiB", zap.String("module", w.s.h.Module))
		return errStreamFailed
	}
	ex := w.s.ex
	ex.ResponseBody = w.body.Bytes()
	act, err := w.s.in.OnResponseBody(end)
	if err == nil && (ex.Local != nil || ex.Closed) {
		err = errors.New("local response or close after the response header was sent")
	}
	if err != nil {
		w.swallow = true
		w.s.failed = true
		w.s.h.logger.Error("wasm plugin failed on a streamed response; response aborted", zap.String("module", w.s.h.Module), zap.Error(err))
		return errStreamFailed
	}
	if act == proxywasm.ActionPause && !end {
		return nil
	}
	out := ex.ResponseBody
	ex.ResponseBody = nil
	w.body.Reset()
	if len(out) == 0 {
		return nil
	}
	_, err = w.ResponseWriter.Write(out)
	return err
}

var errStreamFailed = errors.New("wasm plugin failed on the streamed response")

// unbounded reports whether a response's body is handed to the module as
// it comes rather than whole: one of unknown length (no Content-Length),
// an event stream, or one its upstream marked incremental.
func unbounded(h http.Header) bool {
	return h.Get("Content-Length") == "" || gwctx.IsEventStream(h) || caddyhttp.IsIncremental(h)
}

func (w *responseHook) Write(p []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.swallow {
		if w.streamed {
			return 0, errStreamFailed
		}
		return len(p), nil
	}
	if w.streamed {
		if w.body.Len()+len(p) > maxBodyBytes {
			// written without a flush: the module sees what it has
			if err := w.streamBody(false); err != nil {
				return 0, err
			}
			if w.body.Len()+len(p) > maxBodyBytes {
				w.tooBig = true // held back by the module
				return 0, w.streamBody(false)
			}
		}
		return w.body.Write(p)
	}
	if w.status != 0 { // buffering
		if w.body.Len()+len(p) > maxBodyBytes {
			w.tooBig = true
			w.swallow = true
			return len(p), nil
		}
		return w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *responseHook) ReadFrom(r io.Reader) (int64, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.swallow || w.status != 0 || w.streamed {
		return io.Copy(writerOnly{w}, r)
	}
	return w.ResponseWriterWrapper.ReadFrom(r)
}

type writerOnly struct{ io.Writer }

// FlushError implements the interface http.ResponseController looks for;
// a buffered body is flushed at the end only, a streamed one's after the
// body callback.
func (w *responseHook) FlushError() error {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.streamed {
		if err := w.streamBody(false); err != nil {
			return err
		}
	} else if w.swallow || w.status != 0 {
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// finish runs the response body callback on a buffered body and writes
// it, then the response trailers callback.
func (w *responseHook) finish() {
	if w.status != 0 {
		w.finishBody()
	}
	if w.streamed && w.streamBody(true) != nil {
		return
	}
	if w.started && !w.swallow && !w.s.failed && w.s.in.WantsResponseTrailers() {
		w.trailers()
	}
}

// trailers hands the response trailers set so far (declared in Trailer
// or with net/http's TrailerPrefix) to the module, and sets what it leaves
// as the trailers net/http sends after the body.
func (w *responseHook) trailers() {
	h := w.Header()
	ex := w.s.ex
	ex.ResponseTrailer = http.Header{}
	for k, vs := range h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			ex.ResponseTrailer[http.CanonicalHeaderKey(name)] = vs
			delete(h, k)
		}
	}
	for _, declared := range h.Values("Trailer") {
		for _, name := range strings.Split(declared, ",") {
			name = http.CanonicalHeaderKey(strings.TrimSpace(name))
			if vs, ok := h[name]; ok && name != "" {
				ex.ResponseTrailer[name] = vs
				delete(h, name)
			}
		}
	}
	if _, err := w.s.in.OnResponseTrailers(); err != nil {
		// The status and body are gone already: log it and send no
		// trailers; the instance is discarded.
		w.s.failed = true
		w.s.h.logger.Error("wasm plugin failed in proxy_on_response_trailers", zap.String("module", w.s.h.Module), zap.Error(err))
		return
	}
	for k, vs := range ex.ResponseTrailer {
		h[http.TrailerPrefix+k] = vs
	}
}

// finishBody runs the response body callback on the buffered body and
// writes it.
func (w *responseHook) finishBody() {
	if w.tooBig {
		w.Header().Del("Content-Length")
		gwctx.WriteError(w.ResponseWriter, http.StatusBadGateway, "response body too large for the wasm plugin")
		return
	}
	ex := w.s.ex
	ex.ResponseBody = w.body.Bytes()
	if _, err := w.s.in.OnResponseBody(true); err != nil {
		w.s.fail(w.ResponseWriter, err)
		return
	}
	if w.s.answered(w.ResponseWriter) {
		return
	}
	// a HEAD, 204 or 304 response keeps the upstream's framing headers
	if ex.Request.Method != http.MethodHead && ex.ResponseStatus != http.StatusNoContent && ex.ResponseStatus != http.StatusNotModified {
		w.Header().Set("Content-Length", strconv.Itoa(len(ex.ResponseBody)))
	}
	w.ResponseWriter.WriteHeader(ex.ResponseStatus)
	_, _ = w.ResponseWriter.Write(ex.ResponseBody)
}

// SetDefaults implements schema.Defaulter: module is required, config
// defaults to null.
func (h *Wasm) SetDefaults() {
	h.Module = ""
	h.Config = nil
}

// Interface guards
var (
	_ plugins.Plugin         = (*Wasm)(nil)
	_ plugins.InputValidator = (*Wasm)(nil)
	_ caddy.CleanerUpper     = (*Wasm)(nil)
)
