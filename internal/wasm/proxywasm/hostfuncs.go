package proxywasm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/tetratelabs/wazero/api"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/net/http/httpguts"
)

type hostFunc struct {
	params, results []api.ValueType
	fn              api.GoModuleFunc
}

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
	f64 = api.ValueTypeF64
)

func i32s(n int) []api.ValueType {
	ts := make([]api.ValueType, n)
	for i := range ts {
		ts[i] = i32
	}
	return ts
}

// status is a host function returning a status from its i32 arguments.
func status(nparams int, fn func(ctx context.Context, in *Instance, a []uint64) Status) hostFunc {
	return hostFunc{params: i32s(nparams), results: i32s(1), fn: func(ctx context.Context, _ api.Module, stack []uint64) {
		in := instanceFrom(ctx)
		if in == nil {
			stack[0] = uint64(StatusInternalFailure)
			return
		}
		stack[0] = uint64(fn(ctx, in, stack[:nparams]))
	}}
}

func u32(v uint64) uint32 { return uint32(v) }

// hostFuncs are the functions of module "env" the host implements.
var hostFuncs map[string]hostFunc

func init() {
	hostFuncs = map[string]hostFunc{
		"proxy_log":                          status(3, hostLog),
		"proxy_get_log_level":                status(1, hostGetLogLevel),
		"proxy_get_current_time_nanoseconds": status(1, hostCurrentTime),
		"proxy_set_tick_period_milliseconds": status(1, hostSetTickPeriod),
		"proxy_get_buffer_bytes":             status(5, hostGetBufferBytes),
		"proxy_set_buffer_bytes":             status(5, hostSetBufferBytes),
		"proxy_get_buffer_status":            status(3, hostGetBufferStatus),
		"proxy_get_header_map_pairs":         status(3, hostGetHeaderMapPairs),
		"proxy_set_header_map_pairs":         status(3, hostSetHeaderMapPairs),
		"proxy_get_header_map_size":          status(2, hostGetHeaderMapSize),
		"proxy_get_header_map_value":         status(5, hostGetHeaderMapValue),
		"proxy_add_header_map_value":         status(5, func(ctx context.Context, in *Instance, a []uint64) Status { return hostSetHeaderMapValue(in, a, true) }),
		"proxy_replace_header_map_value":     status(5, func(ctx context.Context, in *Instance, a []uint64) Status { return hostSetHeaderMapValue(in, a, false) }),
		"proxy_remove_header_map_value":      status(3, hostRemoveHeaderMapValue),
		"proxy_send_local_response":          status(8, hostSendLocalResponse),
		"proxy_get_property":                 status(4, hostGetProperty),
		"proxy_get_shared_data":              status(5, hostGetSharedData),
		"proxy_set_shared_data":              status(5, hostSetSharedData),
		"proxy_set_effective_context":        status(1, hostSetEffectiveContext),
		"proxy_continue_stream":              status(1, hostContinueStream),
		"proxy_close_stream":                 status(1, hostCloseStream),
		"proxy_done":                         status(0, func(context.Context, *Instance, []uint64) Status { return StatusNotFound }),
		"proxy_define_metric":                status(4, hostDefineMetric),
		"proxy_get_metric":                   status(2, hostGetMetric),
		"proxy_record_metric": {params: []api.ValueType{i32, i64}, results: i32s(1), fn: func(ctx context.Context, _ api.Module, stack []uint64) {
			stack[0] = uint64(metricOp(instanceFrom(ctx), u32(stack[0]), int64(stack[1]), true))
		}},
		"proxy_increment_metric": {params: []api.ValueType{i32, i64}, results: i32s(1), fn: func(ctx context.Context, _ api.Module, stack []uint64) {
			stack[0] = uint64(metricOp(instanceFrom(ctx), u32(stack[0]), int64(stack[1]), false))
		}},
		// AssemblyScript's runtime imports
		"abort": {params: i32s(4), fn: hostAbort},
		"seed": {results: []api.ValueType{f64}, fn: func(_ context.Context, _ api.Module, stack []uint64) {
			stack[0] = math.Float64bits(rand.Float64() * float64(1<<53))
		}},
		"trace": {params: []api.ValueType{i32, i32, f64, f64, f64, f64, f64}, fn: hostTrace},
		// emscripten-built modules tell the host about memory growth
		"emscripten_notify_memory_growth": {params: i32s(1), fn: func(context.Context, api.Module, []uint64) {}},
	}
}

func hostLog(_ context.Context, in *Instance, a []uint64) Status {
	var lvl zapcore.Level
	switch u32(a[0]) {
	case 0, 1:
		lvl = zap.DebugLevel
	case 2:
		lvl = zap.InfoLevel
	case 3:
		lvl = zap.WarnLevel
	case 4, 5:
		lvl = zap.ErrorLevel
	default:
		return StatusBadArgument
	}
	msg, ok := in.read(u32(a[1]), u32(a[2]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	if ce := in.plugin.cfg.Logger.Check(lvl, ""); ce != nil {
		msg, cut := cutLogLine(msg)
		if !in.spendLog(len(msg)) {
			return StatusOK // over the module's log budget: dropped
		}
		ce.Message = string(msg)
		ce.Write(cut...)
	}
	return StatusOK
}

func hostGetLogLevel(_ context.Context, in *Instance, a []uint64) Status {
	core := in.plugin.cfg.Logger.Core()
	var lvl uint32
	switch {
	case core.Enabled(zap.DebugLevel):
		lvl = 0 // trace and debug both go to debug
	case core.Enabled(zap.InfoLevel):
		lvl = 2
	case core.Enabled(zap.WarnLevel):
		lvl = 3
	default:
		lvl = 4
	}
	if !in.writeU32(u32(a[0]), lvl) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hostCurrentTime(_ context.Context, in *Instance, a []uint64) Status {
	if !in.mem.WriteUint64Le(u32(a[0]), uint64(time.Now().UnixNano())) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hostSetTickPeriod(_ context.Context, in *Instance, a []uint64) Status {
	in.tickPeriod = time.Duration(u32(a[0])) * time.Millisecond
	if in.tickPeriod > 0 && in.tickPeriod < MinTickPeriod {
		in.tickPeriod = MinTickPeriod
	}
	return StatusOK
}

// Buffers (proxy_buffer_type_t).
const (
	bufRequestBody   = 0
	bufResponseBody  = 1
	bufVMConfig      = 6
	bufPluginConfig  = 7
	bufLastKnown     = 8
	maxBufferedBytes = 1 << 20
)

// buffer resolves a buffer id; settable buffers (bodies) are returned as
// pointers to the exchange's slice.
func (in *Instance) buffer(id uint32) ([]byte, *[]byte, Status) {
	switch id {
	case bufPluginConfig:
		return in.plugin.cfg.Configuration, nil, StatusOK
	case bufVMConfig:
		return in.plugin.cfg.VMConfiguration, nil, StatusOK
	case bufRequestBody:
		if in.ex == nil || in.ex.RequestBody == nil {
			return nil, nil, StatusNotFound
		}
		return in.ex.RequestBody, &in.ex.RequestBody, StatusOK
	case bufResponseBody:
		if in.ex == nil || in.ex.ResponseBody == nil {
			return nil, nil, StatusNotFound
		}
		return in.ex.ResponseBody, &in.ex.ResponseBody, StatusOK
	}
	if id > bufLastKnown {
		return nil, nil, StatusBadArgument
	}
	return nil, nil, StatusNotFound
}

func hostGetBufferBytes(ctx context.Context, in *Instance, a []uint64) Status {
	buf, _, st := in.buffer(u32(a[0]))
	if st != StatusOK {
		return st
	}
	start, max := uint64(u32(a[1])), uint64(u32(a[2]))
	if start > uint64(len(buf)) {
		return StatusBadArgument
	}
	end := start + max
	if end > uint64(len(buf)) {
		end = uint64(len(buf))
	}
	return in.returnBytes(ctx, buf[start:end], u32(a[3]), u32(a[4]))
}

func hostSetBufferBytes(_ context.Context, in *Instance, a []uint64) Status {
	buf, dst, st := in.buffer(u32(a[0]))
	if st != StatusOK {
		return st
	}
	if dst == nil {
		return StatusBadArgument // configurations are read-only
	}
	if (u32(a[0]) == bufRequestBody && in.phase != phaseRequest) || (u32(a[0]) == bufResponseBody && in.phase != phaseResponse) {
		return StatusBadArgument
	}
	val, ok := in.read(u32(a[3]), u32(a[4]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	start, size := uint64(u32(a[1])), uint64(u32(a[2]))
	if start > uint64(len(buf)) {
		start = uint64(len(buf))
	}
	end := start + size
	if end > uint64(len(buf)) {
		end = uint64(len(buf))
	}
	if uint64(len(buf))-(end-start)+uint64(len(val)) > maxBufferedBytes {
		return StatusBadArgument
	}
	out := make([]byte, 0, uint64(len(buf))-(end-start)+uint64(len(val)))
	out = append(out, buf[:start]...)
	out = append(out, val...)
	out = append(out, buf[end:]...)
	*dst = out
	return StatusOK
}

func hostGetBufferStatus(_ context.Context, in *Instance, a []uint64) Status {
	buf, _, st := in.buffer(u32(a[0]))
	if st != StatusOK {
		return st
	}
	if !in.writeU32(u32(a[1]), uint32(len(buf))) || !in.writeU32(u32(a[2]), 0) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hostGetHeaderMapPairs(ctx context.Context, in *Instance, a []uint64) Status {
	ps, st := in.mapPairs(u32(a[0]))
	if st != StatusOK {
		return st
	}
	return in.returnBytes(ctx, serializePairs(ps), u32(a[1]), u32(a[2]))
}

func hostGetHeaderMapSize(_ context.Context, in *Instance, a []uint64) Status {
	ps, st := in.mapPairs(u32(a[0]))
	if st != StatusOK {
		return st
	}
	if !in.writeU32(u32(a[1]), uint32(len(serializePairs(ps)))) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hostSetHeaderMapPairs(_ context.Context, in *Instance, a []uint64) Status {
	b, ok := in.read(u32(a[1]), u32(a[2]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	ps, ok := deserializePairs(b)
	if !ok {
		return StatusBadArgument
	}
	return in.mapSetPairs(u32(a[0]), ps)
}

func hostGetHeaderMapValue(ctx context.Context, in *Instance, a []uint64) Status {
	key, ok := in.read(u32(a[1]), u32(a[2]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	v, st := in.mapGet(u32(a[0]), string(key))
	if st != StatusOK {
		return st
	}
	return in.returnBytes(ctx, []byte(v), u32(a[3]), u32(a[4]))
}

func hostSetHeaderMapValue(in *Instance, a []uint64, add bool) Status {
	key, ok := in.read(u32(a[1]), u32(a[2]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	val, ok := in.read(u32(a[3]), u32(a[4]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	// refused before copying: mapSet would refuse it anyway
	if len(key)+len(val) > maxHeaderMapBytes {
		return StatusBadArgument
	}
	return in.mapSet(u32(a[0]), string(key), string(val), add)
}

func hostRemoveHeaderMapValue(_ context.Context, in *Instance, a []uint64) Status {
	key, ok := in.read(u32(a[1]), u32(a[2]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	return in.mapRemove(u32(a[0]), string(key))
}

func hostSendLocalResponse(_ context.Context, in *Instance, a []uint64) Status {
	if in.ex == nil || in.phase == phaseLog || in.phase == phaseRoot {
		return StatusBadArgument
	}
	code := int(u32(a[0]))
	if code < 200 || code > 599 {
		return StatusBadArgument
	}
	details, ok1 := in.read(u32(a[1]), u32(a[2]))
	body, ok2 := in.read(u32(a[3]), u32(a[4]))
	hdr, ok3 := in.read(u32(a[5]), u32(a[6]))
	if !ok1 || !ok2 || !ok3 {
		return StatusInvalidMemoryAccess
	}
	ps, ok := deserializePairs(hdr)
	if !ok {
		return StatusBadArgument
	}
	h := http.Header{}
	for _, p := range ps {
		k := strings.ToLower(p.k)
		if strings.HasPrefix(k, ":") {
			continue
		}
		if !validField(k, p.v) {
			return StatusBadArgument
		}
		h.Add(k, p.v)
	}
	in.ex.Local = &LocalResponse{Status: code, Details: string(details), Header: h, Body: append([]byte(nil), body...)}
	return StatusOK
}

func hostSetEffectiveContext(_ context.Context, in *Instance, a []uint64) Status {
	id := u32(a[0])
	if id != in.rootID && (id == 0 || id != in.streamID) {
		return StatusBadArgument
	}
	in.effective = id
	return StatusOK
}

// Stream types (proxy_stream_type_t).
const (
	streamHTTPRequest  = 0
	streamHTTPResponse = 1
	streamDownstream   = 2
	streamUpstream     = 3
)

func hostContinueStream(_ context.Context, in *Instance, a []uint64) Status {
	switch u32(a[0]) {
	case streamHTTPRequest, streamHTTPResponse:
		// callbacks run to completion: there is never a paused stream to resume
		return StatusOK
	case streamDownstream, streamUpstream:
		return StatusUnimplemented
	}
	return StatusBadArgument
}

func hostCloseStream(_ context.Context, in *Instance, a []uint64) Status {
	switch u32(a[0]) {
	case streamHTTPRequest, streamHTTPResponse:
		if in.ex == nil {
			return StatusNotFound
		}
		in.ex.Closed = true
		return StatusOK
	case streamDownstream, streamUpstream:
		return StatusUnimplemented
	}
	return StatusBadArgument
}

// hostAbort is AssemblyScript's abort(message, file, line, column): it logs
// the message and traps.
func hostAbort(ctx context.Context, _ api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	msg := "abort"
	if in != nil {
		msg = fmt.Sprintf("abort: %s at %s:%d:%d", in.asString(u32(stack[0])), in.asString(u32(stack[1])), u32(stack[2]), u32(stack[3]))
		in.plugin.cfg.Logger.Error(msg)
	}
	panic(errors.New(msg))
}

// hostTrace is AssemblyScript's trace(message, n, a0..a4).
func hostTrace(ctx context.Context, _ api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		return
	}
	n := int(u32(stack[1]))
	if n > 5 {
		n = 5
	}
	args := make([]float64, n)
	for i := range args {
		args[i] = math.Float64frombits(stack[2+i])
	}
	msg := in.asString(u32(stack[0]))
	if len(msg) > MaxLogLine {
		msg = msg[:MaxLogLine]
	}
	if in.plugin.cfg.Logger.Core().Enabled(zap.InfoLevel) && in.spendLog(len(msg)+8*n) {
		in.plugin.cfg.Logger.Info(msg, zap.Float64s("args", args))
	}
}

// asString reads an AssemblyScript string (UTF-16, its byte length in the
// 4 bytes before it).
func (in *Instance) asString(ptr uint32) string {
	if ptr < 4 {
		return ""
	}
	n, ok := in.mem.ReadUint32Le(ptr - 4)
	if !ok || n > 4096 {
		return ""
	}
	b, ok := in.read(ptr, n&^1)
	if !ok {
		return ""
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return string(utf16.Decode(u))
}

func validField(k, v string) bool {
	return httpguts.ValidHeaderFieldName(k) && httpguts.ValidHeaderFieldValue(v)
}
