// Package bound proves, from a WebAssembly module's bytes alone, that every
// call into the module returns after a bounded amount of work, so that the
// host may run it without a watchdog.
//
// The proof is deliberately simple: a function without a loop instruction
// executes each of its instructions at most once per call, so when no
// function loops, no function calls itself directly or through other
// functions, and nothing calls through a table (call_indirect), the number
// of instructions a call executes is at most the sum of the function's
// instructions and its callees' bounds, computed bottom-up over the call
// graph. Instructions whose cost grows with memory or data (bulk memory
// operations, memory.grow, calls into the host) are counted separately as
// "heavy" operations. Anything the decoder does not know (an instruction of
// a proposal the runtime does not enable by default, a malformed
// body) makes the module unproven: the caller keeps its watchdog.
package bound

import (
	"errors"
	"fmt"
)

// Options are the limits of a proof.
type Options struct {
	// MaxInstructions bounds the instructions one call may execute
	// (counted over the whole call tree, host callbacks included).
	MaxInstructions int64
	// MaxHeavy bounds the heavy operations one call may execute: host
	// calls, memory.grow and the bulk memory/table instructions, each of
	// which costs up to the size of the memory or data involved.
	MaxHeavy int64
	// Import says whether a call to the imported function module.name
	// returns after bounded work (host functions that may block or sleep
	// must answer false).
	Import func(module, name string) bool
	// Reentry names exported functions a host call may call back once
	// (the proxy-wasm host calls the module's allocator when it hands data
	// to the module): each host call is charged one call of the costliest.
	Reentry []string
}

// Result is the outcome of Analyze.
type Result struct {
	// Bounded is true when every exported function, the start function
	// and every other defined function provably returns within the limits.
	Bounded bool
	// Reason says why the module is not Bounded (empty when it is).
	Reason string
	// Instructions and Heavy are the largest bounds over all functions
	// (when Bounded).
	Instructions, Heavy int64
}

// function is what the decoder learns about one defined function.
type function struct {
	start, end   int // the body's extent in the module (after its size)
	instructions int64
	heavy        int64
	calls        []uint32 // direct call targets, once per call site
	loops        bool     // has a loop instruction
	indirect     bool     // calls through a table
	// branches counts what starts a basic block in the runtime's
	// compiler: block, loop, if, else, br, br_if and each of br_table's
	// labels (CheckCompile's measure)
	branches int64
}

func (f *function) add(in instr) {
	f.instructions++
	switch in.op {
	case 0x02, 0x03, 0x04, 0x05, 0x0c, 0x0d:
		f.branches++
	case 0x0e:
		f.branches += int64(in.targets)
	}
	switch {
	case in.op == 0x03:
		f.loops = true
	case in.op == 0x10:
		f.calls = append(f.calls, in.callee)
	case in.op == 0x11:
		f.indirect = true
	case in.heavy:
		f.heavy++
	}
}

// walk decodes defined function d of wasm (decoded as m) again, calling
// visit with each instruction.
func (m *module) walk(wasm []byte, d int, visit func(instr)) error {
	f := m.funcs[d]
	return walkBody(&reader{b: wasm[f.start:f.end], off: f.start}, visit)
}

// Analyze decodes wasm and tries the proof. A module the runtime rejects
// may be reported either way; analyze only modules that compiled.
func Analyze(wasm []byte, opt Options) Result {
	m, err := decode(wasm)
	if err != nil {
		return Result{Reason: err.Error()}
	}
	for i, imp := range m.imports {
		if opt.Import == nil || !opt.Import(imp.module, imp.name) {
			return Result{Reason: fmt.Sprintf("imported function %d (%s.%s) is not known to be bounded", i, imp.module, imp.name)}
		}
	}
	nImp := uint32(len(m.imports))
	nFuncs := nImp + uint32(len(m.funcs))
	for i, f := range m.funcs {
		switch {
		case f.loops:
			return Result{Reason: fmt.Sprintf("function %d contains a loop", nImp+uint32(i))}
		case f.indirect:
			return Result{Reason: fmt.Sprintf("function %d calls through a table (call_indirect)", nImp+uint32(i))}
		}
		for _, c := range f.calls {
			if c >= nFuncs {
				return Result{Reason: fmt.Sprintf("function %d calls function %d, which does not exist", nImp+uint32(i), c)}
			}
		}
	}

	// bottom-up bounds with cycle detection (iterative: a module may have
	// call chains deeper than Go's stack should take)
	const (
		unvisited = iota
		visiting
		done
	)
	state := make([]uint8, len(m.funcs))
	instr := make([]int64, len(m.funcs))
	heavy := make([]int64, len(m.funcs))
	// the host call's cost: one heavy operation plus, when it may call
	// back into the module, the costliest reentry function (which must not
	// call the host itself)
	var hostInstr, hostHeavy int64 = 0, 1
	var bound func(root uint32) error
	bound = func(root uint32) error {
		type frame struct {
			f    uint32
			next int
		}
		stack := []frame{{f: root}}
		state[root] = visiting
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			f := &m.funcs[top.f]
			if top.next < len(f.calls) {
				c := f.calls[top.next]
				top.next++
				if c < nImp {
					continue
				}
				d := c - nImp
				switch state[d] {
				case visiting:
					return fmt.Errorf("function %d is recursive (a call cycle through function %d)", d+nImp, top.f+nImp)
				case unvisited:
					state[d] = visiting
					stack = append(stack, frame{f: d})
				}
				continue
			}
			in, hv := f.instructions, f.heavy
			for _, c := range f.calls {
				if c < nImp {
					in, hv = sat(in, hostInstr, opt.MaxInstructions), sat(hv, hostHeavy, opt.MaxHeavy)
				} else {
					in, hv = sat(in, instr[c-nImp], opt.MaxInstructions), sat(hv, heavy[c-nImp], opt.MaxHeavy)
				}
			}
			instr[top.f], heavy[top.f] = in, hv
			state[top.f] = done
			stack = stack[:len(stack)-1]
		}
		return nil
	}
	// reentry functions first, with host calls charged without reentry
	for _, name := range opt.Reentry {
		idx, ok := m.exports[name]
		if !ok {
			continue
		}
		if idx < nImp {
			return Result{Reason: fmt.Sprintf("the callback %s is an imported function", name)}
		}
		if state[idx-nImp] == unvisited {
			if err := bound(idx - nImp); err != nil {
				return Result{Reason: err.Error()}
			}
		}
	}
	for _, name := range opt.Reentry {
		if idx, ok := m.exports[name]; ok {
			d := idx - nImp
			if m.reachesImport(d) {
				return Result{Reason: fmt.Sprintf("the callback %s calls the host, which may call it again", name)}
			}
			hostInstr = max(hostInstr, instr[d])
			hostHeavy = max(hostHeavy, 1+heavy[d])
		}
	}
	// Every function (not only the exported ones: a table, the start
	// function or a future export may reach any of them).
	for d := range m.funcs {
		if state[d] == unvisited {
			if err := bound(uint32(d)); err != nil {
				return Result{Reason: err.Error()}
			}
		}
	}
	res := Result{Bounded: true}
	for d := range m.funcs {
		res.Instructions = max(res.Instructions, instr[d])
		res.Heavy = max(res.Heavy, heavy[d])
	}
	switch {
	case res.Instructions > opt.MaxInstructions:
		return Result{Reason: fmt.Sprintf("a call may execute more than %d instructions", opt.MaxInstructions)}
	case res.Heavy > opt.MaxHeavy:
		return Result{Reason: fmt.Sprintf("a call may execute more than %d host calls or bulk memory operations", opt.MaxHeavy)}
	}
	return res
}

// reachesImport says whether defined function d calls an imported function,
// directly or through other functions (the call graph from d is acyclic:
// d's bound is computed).
func (m *module) reachesImport(d uint32) bool {
	nImp := uint32(len(m.imports))
	seen := map[uint32]bool{d: true}
	todo := []uint32{d}
	for len(todo) > 0 {
		f := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, c := range m.funcs[f].calls {
			if c < nImp {
				return true
			}
			if !seen[c-nImp] {
				seen[c-nImp] = true
				todo = append(todo, c-nImp)
			}
		}
	}
	return false
}

// sat adds b to a, saturating just above limit (bounds of call trees grow
// exponentially with depth).
func sat(a, b, limit int64) int64 {
	if a > limit || b > limit || a+b > limit {
		return limit + 1
	}
	return a + b
}

// errUnknown marks what the decoder does not know (the proof is refused).
var errUnknown = errors.New("not known to the termination proof")
