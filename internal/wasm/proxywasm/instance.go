package proxywasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Status is the ABI's proxy_status_t.
type Status uint32

// Statuses of host calls.
const (
	StatusOK                   Status = 0
	StatusNotFound             Status = 1
	StatusBadArgument          Status = 2
	StatusSerializationFailure Status = 3
	StatusParseFailure         Status = 4
	StatusInvalidMemoryAccess  Status = 6
	StatusEmpty                Status = 7
	StatusCASMismatch          Status = 8
	StatusInternalFailure      Status = 10
	StatusUnimplemented        Status = 12
)

// Action is what a stream callback returns (proxy_action_t).
type Action uint32

// Actions. Hosts such as Envoy know more stop variants (2..4); every
// non-zero action is treated as Pause.
const (
	ActionContinue Action = 0
	ActionPause    Action = 1
)

// Exchange is the HTTP request/response pair a stream context sees. The
// handler fills it; host calls read and modify it in place.
type Exchange struct {
	// Request is the request going upstream: header and pseudo-header
	// mutations of the request phase apply to it.
	Request *http.Request
	// RequestID is the gateway's request id (property request.id).
	RequestID string
	// RequestBody is the buffered request body, when the handler buffers it.
	RequestBody []byte
	// RequestTrailer are the request's trailers, when any.
	RequestTrailer http.Header

	// ResponseStatus and ResponseHeader are set by the handler before the
	// response phase (ResponseHeader is the writer's header map: mutations
	// apply to the response sent).
	ResponseStatus  int
	ResponseHeader  http.Header
	ResponseBody    []byte
	ResponseTrailer http.Header

	// Local is the response the module sent with proxy_send_local_response,
	// if any: the handler sends it instead of (or in place of) the upstream's.
	Local *LocalResponse
	// Closed is set when the module called proxy_close_stream.
	Closed bool
}

// LocalResponse is a response a module sent.
type LocalResponse struct {
	Status  int
	Details string
	Header  http.Header
	Body    []byte
}

// phase is which part of the exchange the current callback may modify.
type phase uint8

const (
	phaseRoot phase = iota
	phaseRequest
	phaseResponse
	phaseLog
)

// Instance is one VM of a plugin: a module instance whose root context is
// started and configured. It is not safe for concurrent use; a Plugin hands
// it to one exchange at a time.
type Instance struct {
	plugin *Plugin
	mod    api.Module
	mem    api.Memory
	ctx    context.Context // carries the instance for host functions

	callCtx  context.Context // ctx, cancelled by the watchdog
	cancel   context.CancelFunc
	watchdog *time.Timer

	fn struct {
		alloc, contextCreate, vmStart, configure, tick  api.Function
		requestHeaders, requestBody, requestTrailers    api.Function
		responseHeaders, responseBody, responseTrailers api.Function
		done, log, delete                               api.Function
	}
	stack      [4]uint64
	allocStack [1]uint64

	rootID    uint32
	nextID    uint32
	streamID  uint32 // 0 when no exchange is active
	effective uint32
	ex        *Exchange
	phase     phase

	tickPeriod time.Duration
	broken     error // set when a call failed: the instance is discarded
}

type instanceKey struct{}

func instanceFrom(ctx context.Context) *Instance {
	in, _ := ctx.Value(instanceKey{}).(*Instance)
	return in
}

// newVM instantiates the module and runs its initialization and
// proxy_on_vm_start; p gives the logger and limits.
func (m *Module) newVM(ctx context.Context, p *Plugin) (*Instance, error) {
	in := &Instance{plugin: p, rootID: 1, nextID: 2}
	in.effective = in.rootID
	out := &logWriter{in: in, level: zap.InfoLevel}
	errw := &logWriter{in: in, level: zap.ErrorLevel}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // called below, with a timeout
		WithStdout(out).WithStderr(errw).
		WithSysWalltime().WithSysNanotime().
		WithRandSource(rand.Reader)
	in.ctx = context.WithValue(context.Background(), instanceKey{}, in)
	in.callCtx, in.cancel = context.WithCancel(in.ctx)
	in.watchdog = time.AfterFunc(time.Hour, in.cancel)
	in.watchdog.Stop()
	ictx, cancel := context.WithTimeout(in.ctx, StartTimeout)
	defer cancel()
	ictx = experimental.WithMemoryAllocator(ictx, p.cfg.Memory)
	mod, err := m.rt.InstantiateModule(ictx, m.compiled, mc)
	if err != nil {
		return nil, fmt.Errorf("instantiating the module: %w", err)
	}
	in.mod = mod
	in.mem = mod.Memory()
	f := &in.fn
	get := func(name string) api.Function {
		if !m.exports[name] {
			return nil
		}
		return mod.ExportedFunction(name)
	}
	f.alloc = get("proxy_on_memory_allocate")
	if f.alloc == nil {
		f.alloc = get("malloc")
	}
	f.contextCreate = get("proxy_on_context_create")
	f.vmStart = get("proxy_on_vm_start")
	f.configure = get("proxy_on_configure")
	f.tick = get("proxy_on_tick")
	f.requestHeaders = get("proxy_on_request_headers")
	f.requestBody = get("proxy_on_request_body")
	f.requestTrailers = get("proxy_on_request_trailers")
	f.responseHeaders = get("proxy_on_response_headers")
	f.responseBody = get("proxy_on_response_body")
	f.responseTrailers = get("proxy_on_response_trailers")
	f.done = get("proxy_on_done")
	f.log = get("proxy_on_log")
	f.delete = get("proxy_on_delete")

	// _initialize (then main) for reactors, _start for commands
	if init := get("_initialize"); init != nil {
		if _, err := in.callTimeout(StartTimeout, init, "_initialize"); err != nil {
			in.close()
			return nil, err
		}
		if mainFn := get("main"); mainFn != nil {
			if d := mainFn.Definition(); len(d.ParamTypes()) == 2 && len(d.ResultTypes()) == 1 {
				if _, err := in.callTimeout(StartTimeout, mainFn, "main", 0, 0); err != nil {
					in.close()
					return nil, err
				}
			}
		}
	} else if start := get("_start"); start != nil {
		if _, err := in.callTimeout(StartTimeout, start, "_start"); err != nil {
			in.close()
			return nil, err
		}
	}
	// the root context exists before the VM starts (SDKs look it up there)
	if _, err := in.callTimeout(StartTimeout, f.contextCreate, "proxy_on_context_create", uint64(in.rootID), 0); err != nil {
		in.close()
		return nil, err
	}
	if ok, err := in.callTimeout(StartTimeout, f.vmStart, "proxy_on_vm_start", uint64(in.rootID), uint64(len(p.cfg.VMConfiguration))); err != nil {
		in.close()
		return nil, err
	} else if f.vmStart != nil && uint32(ok) == 0 {
		in.close()
		return nil, errors.New("proxy_on_vm_start returned false (the VM refused to start)")
	}
	return in, nil
}

// configure runs proxy_on_configure on the root context with the plugin
// configuration.
func (in *Instance) configure() error {
	ok, err := in.callTimeout(StartTimeout, in.fn.configure, "proxy_on_configure", uint64(in.rootID), uint64(len(in.plugin.cfg.Configuration)))
	if err != nil {
		return err
	}
	if in.fn.configure != nil && uint32(ok) == 0 {
		return errors.New("proxy_on_configure returned false (the module rejected its plugin configuration)")
	}
	return nil
}

// call runs one callback bounded by the plugin's call timeout.
func (in *Instance) call(fn api.Function, name string, args ...uint64) (uint64, error) {
	return in.callTimeout(in.plugin.cfg.CallTimeout, fn, name, args...)
}

func (in *Instance) callTimeout(d time.Duration, fn api.Function, name string, args ...uint64) (uint64, error) {
	if in.broken != nil {
		return 0, in.broken
	}
	if fn == nil {
		return 0, nil
	}
	stack := in.stack[:]
	if len(args) > len(stack) {
		stack = make([]uint64, len(args))
	}
	copy(stack, args)
	if in.plugin.module.Bounded {
		// proven to return on its own: no watchdog to arm (wazero
		// ignores the context of a module compiled without one)
		if err := fn.CallWithStack(in.ctx, stack); err != nil {
			in.broken = callError(name, d, err, false)
			return 0, in.broken
		}
		return in.result(fn, stack), nil
	}
	// The watchdog cancels the instance's call context when the call
	// overruns; wazero then stops the module (WithCloseOnContextDone). One
	// timer per instance, re-armed per call: a context.WithTimeout per
	// call would cost more than the call itself.
	in.watchdog.Reset(d)
	err := fn.CallWithStack(in.callCtx, stack)
	fired := !in.watchdog.Stop()
	if fired {
		// the context is cancelled for good: the instance cannot be reused
		// even when the call returned just in time
		in.broken = callError(name, d, context.DeadlineExceeded, true)
		return 0, in.broken
	}
	if err != nil {
		in.broken = callError(name, d, err, false)
		return 0, in.broken
	}
	return in.result(fn, stack), nil
}

func (in *Instance) result(fn api.Function, stack []uint64) uint64 {
	if len(fn.Definition().ResultTypes()) == 0 {
		return 0
	}
	return stack[0]
}

// CallError is a failed callback: a trap, a timeout, an exit. The instance
// that failed is discarded.
type CallError struct {
	Callback string
	Err      error
	Timeout  bool
}

func (e *CallError) Error() string { return e.Callback + ": " + e.Err.Error() }
func (e *CallError) Unwrap() error { return e.Err }

func callError(name string, d time.Duration, err error, timedOut bool) error {
	var exit *sys.ExitError
	switch {
	case timedOut:
		return &CallError{Callback: name, Timeout: true, Err: fmt.Errorf("did not return within %v", d)}
	case errors.As(err, &exit):
		return &CallError{Callback: name, Err: fmt.Errorf("the module exited (code %d)", exit.ExitCode())}
	}
	// wazero's trap errors carry a stack trace after the first line
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return &CallError{Callback: name, Err: errors.New(msg)}
}

// Failed is the error that made the instance unusable, if any.
func (in *Instance) Failed() error { return in.broken }

func (in *Instance) close() {
	in.watchdog.Stop()
	in.cancel()
	if in.mod != nil {
		_ = in.mod.Close(context.Background())
	}
}

// Begin starts a stream context for ex (proxy_on_context_create).
func (in *Instance) Begin(ex *Exchange) error {
	in.streamID = in.nextID
	in.nextID++
	if in.nextID < 2 {
		in.nextID = 2
	}
	in.ex = ex
	in.effective = in.streamID
	in.phase = phaseRequest
	_, err := in.call(in.fn.contextCreate, "proxy_on_context_create", uint64(in.streamID), uint64(in.rootID))
	return err
}

func boolArg(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (in *Instance) streamCall(fn api.Function, name string, ph phase, args ...uint64) (Action, error) {
	if fn == nil {
		return ActionContinue, in.broken
	}
	in.phase = ph
	in.effective = in.streamID
	r, err := in.call(fn, name, args...)
	if err != nil {
		return ActionContinue, err
	}
	if uint32(r) != 0 {
		return ActionPause, nil
	}
	return ActionContinue, nil
}

// OnRequestHeaders runs proxy_on_request_headers.
func (in *Instance) OnRequestHeaders(endOfStream bool) (Action, error) {
	n := countRequestHeaders(in.ex.Request)
	return in.streamCall(in.fn.requestHeaders, "proxy_on_request_headers", phaseRequest, uint64(in.streamID), uint64(n), boolArg(endOfStream))
}

// OnRequestBody runs proxy_on_request_body on the whole buffered body
// (Exchange.RequestBody, which the module may replace).
func (in *Instance) OnRequestBody(endOfStream bool) (Action, error) {
	return in.streamCall(in.fn.requestBody, "proxy_on_request_body", phaseRequest, uint64(in.streamID), uint64(len(in.ex.RequestBody)), boolArg(endOfStream))
}

// OnRequestTrailers runs proxy_on_request_trailers on
// Exchange.RequestTrailer (the module may change it).
func (in *Instance) OnRequestTrailers() (Action, error) {
	return in.trailersCall(in.fn.requestTrailers, "proxy_on_request_trailers", phaseRequest, &in.ex.RequestTrailer)
}

// OnResponseHeaders runs proxy_on_response_headers.
func (in *Instance) OnResponseHeaders(endOfStream bool) (Action, error) {
	n := 1 + countHeader(in.ex.ResponseHeader)
	return in.streamCall(in.fn.responseHeaders, "proxy_on_response_headers", phaseResponse, uint64(in.streamID), uint64(n), boolArg(endOfStream))
}

// OnResponseBody runs proxy_on_response_body on the whole buffered body.
func (in *Instance) OnResponseBody(endOfStream bool) (Action, error) {
	return in.streamCall(in.fn.responseBody, "proxy_on_response_body", phaseResponse, uint64(in.streamID), uint64(len(in.ex.ResponseBody)), boolArg(endOfStream))
}

// OnResponseTrailers runs proxy_on_response_trailers on
// Exchange.ResponseTrailer (the module may change it).
func (in *Instance) OnResponseTrailers() (Action, error) {
	return in.trailersCall(in.fn.responseTrailers, "proxy_on_response_trailers", phaseResponse, &in.ex.ResponseTrailer)
}

// trailersCall runs a trailers callback on *trailers, made empty first
// when there were none (the module may add some).
func (in *Instance) trailersCall(fn api.Function, name string, ph phase, trailers *http.Header) (Action, error) {
	if *trailers == nil {
		*trailers = http.Header{}
	}
	return in.streamCall(fn, name, ph, uint64(in.streamID), uint64(countHeader(*trailers)))
}

// WantsRequestTrailers says whether the module has a request trailers
// callback (the handler then reads the whole request body to reach them).
func (in *Instance) WantsRequestTrailers() bool { return in.fn.requestTrailers != nil }

// WantsResponseTrailers says whether the module has a response trailers
// callback.
func (in *Instance) WantsResponseTrailers() bool { return in.fn.responseTrailers != nil }

// WantsRequestBody says whether the module has a request body callback
// (the handler buffers the body only then).
func (in *Instance) WantsRequestBody() bool { return in.fn.requestBody != nil }

// WantsResponseBody says whether the module has a response body callback.
func (in *Instance) WantsResponseBody() bool { return in.fn.responseBody != nil }

// End finishes the stream context: proxy_on_done, proxy_on_log,
// proxy_on_delete. The instance is then free for another exchange.
func (in *Instance) End() error {
	defer func() {
		in.ex = nil
		in.streamID = 0
		in.effective = in.rootID
		in.phase = phaseRoot
	}()
	if in.broken != nil {
		return in.broken
	}
	in.phase = phaseLog
	id := uint64(in.streamID)
	// proxy_on_done returning false asks the host to wait for proxy_done;
	// nothing can complete asynchronously here, so the stream ends anyway.
	if _, err := in.call(in.fn.done, "proxy_on_done", id); err != nil {
		return err
	}
	if _, err := in.call(in.fn.log, "proxy_on_log", id); err != nil {
		return err
	}
	_, err := in.call(in.fn.delete, "proxy_on_delete", id)
	return err
}

// tick runs proxy_on_tick on the root context.
func (in *Instance) tick() error {
	in.effective = in.rootID
	_, err := in.call(in.fn.tick, "proxy_on_tick", uint64(in.rootID))
	return err
}

// memory helpers (host functions run on the instance's goroutine)

func (in *Instance) read(ptr, size uint32) ([]byte, bool) {
	return in.mem.Read(ptr, size)
}

func (in *Instance) writeU32(ptr, v uint32) bool { return in.mem.WriteUint32Le(ptr, v) }

// returnBytes hands data to the module: it allocates a buffer with the
// module's allocator, copies data and writes the buffer's address and size
// to retPtr and retSize.
func (in *Instance) returnBytes(ctx context.Context, data []byte, retPtr, retSize uint32) Status {
	var addr uint32
	if len(data) > 0 {
		if in.fn.alloc == nil {
			return StatusInternalFailure
		}
		in.allocStack[0] = uint64(len(data))
		if err := in.fn.alloc.CallWithStack(ctx, in.allocStack[:]); err != nil {
			// a trap or timeout in the allocator fails the whole callback
			panic(err)
		}
		addr = uint32(in.allocStack[0])
		if addr == 0 || !in.mem.Write(addr, data) {
			return StatusInvalidMemoryAccess
		}
	}
	if !in.writeU32(retPtr, addr) || !in.writeU32(retSize, uint32(len(data))) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

// logWriter sends a module's stdout or stderr to the log: each line
// written is an entry (capped at MaxLogLine), without buffering across
// writes, within the module's log budget (Instance.spendLog).
type logWriter struct {
	in    *Instance
	level zapcore.Level
}

func (w *logWriter) Write(p []byte) (int, error) {
	// Lines are cut off p one at a time: bytes.Split would allocate a
	// slice header per line, 24 bytes per byte of a write of newlines.
	for rest := p; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(line) == 0 {
			continue
		}
		if ce := w.in.plugin.cfg.Logger.Check(w.level, ""); ce != nil {
			line, cut := cutLogLine(line)
			if !w.in.spendLog(len(line)) {
				continue // dropped, and counted
			}
			ce.Message = string(line)
			ce.Write(cut...)
		}
	}
	return len(p), nil
}
