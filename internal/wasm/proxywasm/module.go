package proxywasm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/caddy-gateway/gateway/internal/wasm/bound"
	"github.com/caddy-gateway/gateway/internal/wasm/wasmlimits"
)

// Limits of every module instance.
const (
	// MaxMemoryPages caps an instance's linear memory: 1024 pages of 64 KiB
	// = 64 MiB. memory.grow beyond fails (returns -1) inside the module.
	MaxMemoryPages = 1024
	// DefaultCallTimeout bounds one callback into a module (a request's
	// header callback, a tick …). It is wall-clock time: on an overloaded
	// host a callback of microseconds can wait for a CPU for tens of
	// milliseconds, so the bound is generous; it exists to stop loops.
	DefaultCallTimeout = 500 * time.Millisecond
	// StartTimeout bounds starting a VM and configuring its root context
	// (language runtimes initialize there).
	StartTimeout = 2 * time.Second
	// MaxFunctionBranches and MaxCompileCost bound the work of compiling
	// a module (bound.CompileLimits): the compiler's time grows with the
	// square of a function's branches. SDK-built modules are far below:
	// a Go (gc, wasip1) hello world's largest function has 1,801 branches
	// and its cost is 1.6e8; TinyGo, Rust, Zig and AssemblyScript modules
	// have at most a few hundred branches per function and costs below
	// 5e6. At the limits a module compiles in seconds to about a quarter
	// of a minute of one core.
	MaxFunctionBranches = 20_000
	MaxCompileCost      = 2_000_000_000
	// releaseGrace is how long a compiled module no longer referenced is
	// kept, so that a reload removing and re-adding it does not recompile.
	releaseGrace = time.Minute
)

// DeclaredLimits are what a module may declare (package wasmlimits),
// checked before the runtime decodes it: wasmlimits.Default with the
// memory's initial size at MaxMemoryPages.
var DeclaredLimits = func() wasmlimits.Limits {
	l := wasmlimits.Default
	l.MaxMemoryPages = MaxMemoryPages
	return l
}()

// Module is a compiled proxy-wasm module. Obtain one with Compile and
// Release it when done.
type Module struct {
	// SHA256 is the hex sha256 of the module bytes.
	SHA256 string
	// ABI is the proxy-wasm ABI version the module declares ("0.2.0" or
	// "0.2.1").
	ABI string

	// Bounded says the module provably returns from every call after
	// bounded work (package bound): it runs without a watchdog.
	// Unbounded is why not, when not.
	Bounded   bool
	Unbounded string

	rt       wazero.Runtime
	compiled wazero.CompiledModule
	exports  map[string]bool
	// initialMemory is the bytes an instance's memory starts with, which
	// a memory budget must have room for before the instance starts.
	initialMemory int64

	refs  int
	timer *time.Timer
}

var cache = struct {
	mu sync.Mutex
	m  map[string]*Module
	// compiling are the compilations under way by content hash: the
	// lock is not held while a module compiles (seconds, at the compile
	// limits), so that loading a configuration whose modules are compiled
	// does not wait for an upload's check.
	compiling map[string]chan struct{}
}{m: map[string]*Module{}, compiling: map[string]chan struct{}{}}

// Compile returns the compiled module of wasm, compiling it on first use and
// checking that it exports and imports what the ABI needs. The result is
// shared per content hash; the caller must Release it. A compilation of
// the same bytes under way is waited for; when ctx is done, compiling stops
// at the next function and Compile returns ctx's error.
func Compile(ctx context.Context, wasm []byte) (*Module, error) {
	sha := SHA256(wasm)
	for {
		cache.mu.Lock()
		if m, ok := cache.m[sha]; ok {
			m.refs++
			if m.timer != nil {
				m.timer.Stop()
				m.timer = nil
			}
			cache.mu.Unlock()
			return m, nil
		}
		wait, busy := cache.compiling[sha]
		if !busy {
			cache.compiling[sha] = make(chan struct{})
		}
		cache.mu.Unlock()
		if !busy {
			break
		}
		// the other compilation's outcome: its module, or (failed or
		// canceled) compiling again here
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m, err := compile(ctx, sha, wasm)
	cache.mu.Lock()
	defer cache.mu.Unlock()
	close(cache.compiling[sha])
	delete(cache.compiling, sha)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	m.refs = 1
	cache.m[sha] = m
	return m, nil
}

// Release gives back a reference obtained from Compile. The module is closed
// a grace period after its last reference is released.
func (m *Module) Release() {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	m.refs--
	if m.refs > 0 {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(releaseGrace, func() {
		cache.mu.Lock()
		if m.refs > 0 || m.timer != t {
			cache.mu.Unlock()
			return
		}
		delete(cache.m, m.SHA256)
		cache.mu.Unlock()
		_ = m.rt.Close(context.Background())
	})
	m.timer = t
}

// CheckModule compiles wasm and starts one VM of it (running its
// initialization and proxy_on_vm_start), returning an error a module author
// can act on when the module is not a usable proxy-wasm 0.2.x module.
func CheckModule(ctx context.Context, wasm []byte) error {
	m, err := Compile(ctx, wasm)
	if err != nil {
		return err
	}
	defer m.Release()
	check := &Plugin{cfg: PluginConfig{CallTimeout: StartTimeout}.withDefaults(), module: m, shared: newSharedStore()}
	in, err := m.newVM(ctx, check)
	if err != nil {
		return err
	}
	in.close()
	return nil
}

// callbackSigs are the signatures of the callbacks the host calls (a module
// exporting one with another signature is refused rather than failing at
// request time).
var callbackSigs = map[string]string{
	"_initialize":                "()->()",
	"_start":                     "()->()",
	"proxy_on_memory_allocate":   "(i32)->(i32)",
	"malloc":                     "(i32)->(i32)",
	"proxy_on_context_create":    "(i32,i32)->()",
	"proxy_on_vm_start":          "(i32,i32)->(i32)",
	"proxy_on_configure":         "(i32,i32)->(i32)",
	"proxy_on_tick":              "(i32)->()",
	"proxy_on_request_headers":   "(i32,i32,i32)->(i32)",
	"proxy_on_request_body":      "(i32,i32,i32)->(i32)",
	"proxy_on_request_trailers":  "(i32,i32)->(i32)",
	"proxy_on_response_headers":  "(i32,i32,i32)->(i32)",
	"proxy_on_response_body":     "(i32,i32,i32)->(i32)",
	"proxy_on_response_trailers": "(i32,i32)->(i32)",
	"proxy_on_done":              "(i32)->(i32)",
	"proxy_on_log":               "(i32)->()",
	"proxy_on_delete":            "(i32)->()",
}

func sig(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ",")
	}
	return "(" + names(params) + ")->(" + names(results) + ")"
}

// Limits of the termination proof (package bound): a module proven to
// execute at most this many instructions and host calls or bulk memory
// operations per callback runs without a watchdog. Straight-line code of
// 10 million instructions takes milliseconds; each heavy operation is at
// most a copy of the memory (64 MiB) or of a request's data.
const (
	boundedInstructions = 10_000_000
	boundedHeavy        = 32
)

// boundedWASI are the WASI functions that return after work bounded by
// their arguments: no sleeping (poll_oneoff), no reading (stdin), no
// yielding.
var boundedWASI = map[string]bool{
	"args_get": true, "args_sizes_get": true, "environ_get": true, "environ_sizes_get": true,
	"clock_res_get": true, "clock_time_get": true, "fd_write": true, "fd_close": true,
	"fd_fdstat_get": true, "fd_prestat_get": true, "fd_prestat_dir_name": true, "fd_seek": true,
	"proc_exit": true, "random_get": true,
}

// proveBounded runs the termination proof with the host's imports: every
// env function the host provides is bounded (none blocks), WASI only as
// listed, and a host call may call the allocator back once.
func proveBounded(wasm []byte) bound.Result {
	return bound.Analyze(wasm, bound.Options{
		MaxInstructions: boundedInstructions,
		MaxHeavy:        boundedHeavy,
		Import: func(mod, name string) bool {
			switch mod {
			case "env":
				_, ok := hostFuncs[name]
				return ok || strings.HasPrefix(name, "proxy_") // unimplemented: returns at once
			case "wasi_snapshot_preview1", "wasi_unstable":
				return boundedWASI[name]
			}
			return false
		},
		Reentry: []string{"proxy_on_memory_allocate", "malloc"},
	})
}

// guardUnbounded is off only in a benchmark measuring what the guard's
// checkpoints cost.
var guardUnbounded = true

func compile(ctx context.Context, sha string, wasm []byte) (m *Module, err error) {
	// A module that may loop or recurse runs with wazero's watchdog: every
	// loop iteration checks whether the call's context is done. The check
	// costs a goroutine per call into the module, so a module proven to
	// return on its own is compiled without it.
	if err := wasmlimits.Check(wasm, DeclaredLimits); err != nil {
		return nil, fmt.Errorf("invalid WebAssembly module: %w", err)
	}
	limits := bound.CompileLimits{MaxFunctionBranches: MaxFunctionBranches, MaxCost: MaxCompileCost}
	if err := bound.CheckCompile(wasm, limits); err != nil {
		return nil, err
	}
	proof := proveBounded(wasm)
	// The watchdog acts only at loop headers: recursion and long
	// straight-line call trees get checkpoints (empty loops) so that it
	// sees them too. Those loops are compiled like the module's own, so
	// the module as it will run is held to the compile limits.
	var guarded []byte
	if !proof.Bounded && guardUnbounded {
		g, n, gerr := bound.Guard(wasm)
		switch {
		case gerr != nil:
			proof.Reason += "; the watchdog sees only its loops (" + gerr.Error() + ")"
		case n > 0:
			if err := bound.CheckCompile(g, limits); err != nil {
				return nil, fmt.Errorf("with the watchdog's checkpoints added (the module may loop or recurse, so every call_indirect and every few calls get one): %w", err)
			}
			guarded = g
		}
	}
	cfg := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(!proof.Bounded).
		WithMemoryLimitPages(MaxMemoryPages)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer func() {
		if err != nil {
			_ = rt.Close(ctx)
		}
	}()
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("invalid WebAssembly module: %w", err)
	}
	if guarded != nil {
		g, gerr := rt.CompileModule(ctx, guarded)
		if gerr != nil {
			// a defect of the guard: run the module as uploaded
			proof.Reason += "; the watchdog sees only its loops (guarding failed: " + gerr.Error() + ")"
		} else {
			_ = compiled.Close(ctx)
			compiled = g
		}
	}
	m = &Module{SHA256: sha, Bounded: proof.Bounded, Unbounded: proof.Reason, rt: rt, compiled: compiled, exports: map[string]bool{}}

	// exports
	mem, ok := compiled.ExportedMemories()["memory"]
	if !ok {
		return nil, errors.New(`the module must export its linear memory as "memory"`)
	}
	m.initialMemory = int64(mem.Min()) << 16
	fns := compiled.ExportedFunctions()
	for name, def := range fns {
		if want, ok := callbackSigs[name]; ok {
			if got := sig(def.ParamTypes(), def.ResultTypes()); got != want {
				return nil, fmt.Errorf("exported function %s has signature %s, the proxy-wasm ABI's is %s", name, got, want)
			}
		}
		m.exports[name] = true
	}
	switch {
	case m.exports["proxy_abi_version_0_2_1"]:
		m.ABI = "0.2.1"
	case m.exports["proxy_abi_version_0_2_0"]:
		m.ABI = "0.2.0"
	case m.exports["proxy_abi_version_0_1_0"]:
		return nil, errors.New("the module targets proxy-wasm ABI 0.1.0, which is not supported: rebuild it with an SDK targeting ABI 0.2.0 or 0.2.1")
	default:
		return nil, errors.New("the module exports no proxy-wasm ABI version marker (proxy_abi_version_0_2_1 or proxy_abi_version_0_2_0): is it built with a proxy-wasm SDK?")
	}
	if !m.exports["proxy_on_memory_allocate"] && !m.exports["malloc"] {
		return nil, errors.New("the module exports no allocator (proxy_on_memory_allocate or malloc): the host cannot hand it data")
	}
	if !m.exports["proxy_on_context_create"] {
		return nil, errors.New("the module does not export proxy_on_context_create")
	}

	// imports
	if mems := compiled.ImportedMemories(); len(mems) > 0 {
		mod, name, _ := mems[0].Import()
		return nil, fmt.Errorf("the module imports its memory (%s.%s): it must define and export its own", mod, name)
	}
	env := rt.NewHostModuleBuilder("env")
	provided := map[string]bool{}
	var unknown []string
	for _, def := range compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		switch mod {
		case "wasi_snapshot_preview1", "wasi_unstable":
			continue
		case "env":
		default:
			return nil, fmt.Errorf("the module imports %s.%s: only the proxy-wasm ABI (module env) and WASI (wasi_snapshot_preview1, wasi_unstable) are provided", mod, name)
		}
		if provided[name] {
			continue
		}
		got := sig(def.ParamTypes(), def.ResultTypes())
		if hf, ok := hostFuncs[name]; ok {
			if want := sig(hf.params, hf.results); got != want {
				return nil, fmt.Errorf("the module imports env.%s with signature %s, the proxy-wasm ABI's is %s", name, got, want)
			}
			env.NewFunctionBuilder().WithGoModuleFunction(hf.fn, hf.params, hf.results).Export(name)
		} else if strings.HasPrefix(name, "proxy_") {
			env.NewFunctionBuilder().WithGoModuleFunction(unimplemented(def.ResultTypes()), def.ParamTypes(), def.ResultTypes()).Export(name)
		} else {
			unknown = append(unknown, name+sig(def.ParamTypes(), def.ResultTypes()))
			continue
		}
		provided[name] = true
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("the module imports functions this host does not provide: env.%s (a proxy-wasm module may import proxy_* functions, abort, seed and WASI)", strings.Join(unknown, ", env."))
	}
	if _, err := env.Instantiate(ctx); err != nil {
		return nil, fmt.Errorf("providing host functions: %w", err)
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, fmt.Errorf("providing WASI: %w", err)
	}
	legacy := rt.NewHostModuleBuilder("wasi_unstable")
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(legacy)
	if _, err := legacy.Instantiate(ctx); err != nil {
		return nil, fmt.Errorf("providing WASI (wasi_unstable): %w", err)
	}
	return m, nil
}

// unimplemented is the host function of a proxy_* import the host does not
// implement: it returns the ABI's Unimplemented status (and zero for any
// other result) instead of trapping.
func unimplemented(results []api.ValueType) api.GoModuleFunc {
	return func(_ context.Context, _ api.Module, stack []uint64) {
		for i := range results {
			stack[i] = 0
		}
		if len(results) > 0 && results[0] == api.ValueTypeI32 {
			stack[0] = uint64(StatusUnimplemented)
		}
	}
}
