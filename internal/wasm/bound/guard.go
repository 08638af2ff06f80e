package bound

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// A runtime that stops a module by checking, at loop headers, whether its
// call was cancelled (wazero's WithCloseOnContextDone) cannot stop a module
// that computes for long without looping: a recursion such as a naive
// Fibonacci, or a call tree of straight-line functions that fans out
// exponentially. Guard adds checkpoints (an empty loop: `loop end`, which
// changes nothing else) so that a call never executes more than
// segmentBudget cost units between two checks.
const (
	// segmentBudget bounds the cost between two checks: an instruction
	// costs 1, a heavy operation (host call, memory.grow, bulk memory)
	// heavyCost.
	segmentBudget = 1_000_000
	heavyCost     = 100_000
)

// checkpoint is the instruction sequence Guard inserts: loop (empty block
// type) end.
var checkpoint = []byte{0x03, 0x40, 0x0b}

// summary is what a caller needs to know of a function's checks: the cost
// from its entry to its first check (head) and from its last check to its
// return (tail), or the cost of a whole call when it has none (through).
// Each is at most segmentBudget.
type summary struct {
	checked          bool
	head, tail, thru int64
}

// Guard returns wasm with checkpoints inserted so that every execution
// path passes a loop header at least every segmentBudget cost units: at
// the entry and exits of a set of functions that breaks every cycle of
// calls, before and after every call_indirect (whose target is unknown),
// and wherever straight-line code, including the calls it makes, would
// exceed the budget. It returns
// how many checkpoints it inserted (zero: wasm itself). Modules the decoder
// does not know (a proposal beyond WebAssembly 2.0) are an error: the caller keeps them unguarded.
func Guard(wasm []byte) ([]byte, int, error) {
	m, err := decode(wasm)
	if err != nil {
		return nil, 0, err
	}
	nImp := uint32(len(m.imports))
	nFuncs := nImp + uint32(len(m.funcs))
	for i, f := range m.funcs {
		for _, c := range f.calls {
			if c >= nFuncs {
				return nil, 0, fmt.Errorf("function %d calls function %d, which does not exist", nImp+uint32(i), c)
			}
		}
	}
	comp, order := m.components()
	g := &guard{m: m, wasm: wasm, comp: comp, sums: make([]summary, len(m.funcs))}
	inserts := make([][]int, len(m.funcs))
	total := 0
	// groups in order, callees' groups before their callers'
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && comp[order[j]] == comp[order[i]] {
			j++
		}
		group := order[i:j]
		i = j
		if comp[group[0]] < 0 { // one function, not recursive
			d := group[0]
			if inserts[d], err = g.scan(d); err != nil {
				return nil, 0, err
			}
			total += len(inserts[d])
			continue
		}
		// A recursive group: the functions of a set that breaks every
		// cycle of calls (the "checked" ones) check at their entry and
		// before they return, so that descending and unwinding recursion
		// both pass a check at least once per cycle; the others form an
		// acyclic remainder, scanned callees first like any function.
		for _, d := range g.breakCycles(group) {
			if inserts[d], err = g.scan(d); err != nil {
				return nil, 0, err
			}
			total += len(inserts[d])
		}
	}
	if total == 0 {
		return wasm, 0, nil
	}
	return m.rewrite(wasm, inserts), total, nil
}

// guard is the state of Guard.
type guard struct {
	m    *module
	wasm []byte
	comp []int
	sums []summary // of the functions scanned
	// cut marks the functions of recursive groups that check at their
	// entry and exits
	cut map[int]bool
}

// breakCycles chooses the functions of a recursive group that check at
// their entry and exits (added to g.cut) so that the rest of the group
// calls no cycle, and returns the group in scanning order: the rest with
// callees first, then the chosen. It prefers functions with few call
// sites (a runtime's hot helpers, such as reference counting, have many).
func (g *guard) breakCycles(group []int) []int {
	if g.cut == nil {
		g.cut = map[int]bool{}
	}
	nImp := uint32(len(g.m.imports))
	in := map[int]bool{}
	for _, d := range group {
		in[d] = true
	}
	callers := map[int]int{}
	for _, f := range g.m.funcs {
		for _, c := range f.calls {
			if c >= nImp && in[int(c-nImp)] {
				callers[int(c-nImp)]++
			}
		}
	}
	// a depth-first search of the remainder: a call back to a function
	// on the search path closes a cycle; cut its least called function
	// and search again (each round cuts one function)
	for {
		const (
			unseen = iota
			onPath
			finished
		)
		state := map[int]int{}
		var post, path []int
		var cycle []int
		var visit func(d int) bool
		visit = func(d int) bool {
			state[d] = onPath
			path = append(path, d)
			for _, c := range g.m.funcs[d].calls {
				if c < nImp {
					continue
				}
				e := int(c - nImp)
				if !in[e] || g.cut[e] {
					continue
				}
				switch state[e] {
				case onPath:
					i := len(path) - 1
					for path[i] != e {
						i--
					}
					cycle = path[i:]
					return false
				case unseen:
					if !visit(e) {
						return false
					}
				}
			}
			state[d] = finished
			path = path[:len(path)-1]
			post = append(post, d)
			return true
		}
		ok := true
		for _, d := range group {
			if !g.cut[d] && state[d] == unseen {
				if ok = visit(d); !ok {
					break
				}
			}
		}
		if ok {
			for _, d := range group {
				if g.cut[d] {
					post = append(post, d)
				}
			}
			return post
		}
		best := cycle[0]
		for _, d := range cycle {
			if callers[d] < callers[best] {
				best = d
			}
		}
		g.cut[best] = true
	}
}

// scan computes where defined function d needs checkpoints and its
// summary, given its callees' summaries (outside its recursive group).
func (g *guard) scan(d int) ([]int, error) {
	nImp := uint32(len(g.m.imports))
	cut := g.cut[d]
	var s summary
	var ins []int
	acc := int64(0)
	reached := func(tail int64) { // a check: a segment ends
		if !s.checked {
			s.head, s.checked = acc, true
		}
		acc = tail
	}
	insert := func(off int) {
		if len(ins) == 0 || ins[len(ins)-1] != off {
			ins = append(ins, off)
		}
		reached(0)
	}
	add := func(cost int64, off int) {
		if acc+cost > segmentBudget {
			insert(off)
		}
		acc += cost
	}
	first := true
	err := g.m.walk(g.wasm, d, func(in instr) {
		if first && cut {
			insert(in.off) // the entry check
		}
		first = false
		if in.exits && cut {
			insert(in.off) // a check before leaving
		}
		switch {
		case in.op == 0x03: // loop: its header checks
			acc++
			reached(0)
		case in.op == 0x11:
			// an unknown callee: a check before; after, its tail is
			// unknown (at most the budget): a check again
			insert(in.off)
			acc++
			insert(in.end)
		case in.op == 0x10 && in.callee < nImp:
			add(heavyCost, in.off)
		case in.op == 0x10 && g.cut[int(in.callee-nImp)]:
			// the callee checks at its entry and before it returns
			add(1, in.off)
			reached(1)
		case in.op == 0x10:
			c := g.sums[in.callee-nImp]
			if !c.checked {
				add(1+c.thru, in.off)
				break
			}
			add(1+c.head, in.off)
			reached(c.tail)
		case in.heavy:
			add(heavyCost, in.off)
		default:
			add(1, in.off)
		}
	})
	if s.checked {
		s.tail = acc
	} else {
		s.thru = acc
	}
	g.sums[d] = s
	return ins, err
}

// components finds the recursive groups of the direct call graph
// (Tarjan's strongly connected components, iteratively). comp[d] is d's
// group, shared only by functions that may call each other in a cycle (a
// function alone gets a group of its own unless it calls itself); order
// lists the functions with every callee's group before its callers'.
func (m *module) components() (comp []int, order []int) {
	n := len(m.funcs)
	nImp := uint32(len(m.imports))
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	comp = make([]int, n)
	var stack []int
	next, ncomp := 0, 0
	type frame struct{ v, edge int }
	for root := 0; root < n; root++ {
		if index[root] >= 0 {
			continue
		}
		work := []frame{{v: root}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(work) > 0 {
			top := &work[len(work)-1]
			calls := m.funcs[top.v].calls
			if top.edge < len(calls) {
				c := calls[top.edge]
				top.edge++
				if c < nImp {
					continue
				}
				w := int(c - nImp)
				switch {
				case index[w] < 0:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					work = append(work, frame{v: w})
				case onStack[w]:
					low[top.v] = min(low[top.v], index[w])
				}
				continue
			}
			v := top.v
			work = work[:len(work)-1]
			if len(work) > 0 {
				p := work[len(work)-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = ncomp
					order = append(order, w)
					if w == v {
						break
					}
				}
				ncomp++
			}
		}
	}
	// A function alone in its group recurses only when it calls itself;
	// give the others a group id no call can share with them.
	size := make([]int, ncomp)
	for _, c := range comp {
		size[c]++
	}
	for d, f := range m.funcs {
		if size[comp[d]] == 1 && !slices.Contains(f.calls, nImp+uint32(d)) {
			comp[d] = -1 - d
		}
	}
	return comp, order
}

// rewrite rebuilds the code section with checkpoints inserted at the given
// module offsets of each function's body.
func (m *module) rewrite(wasm []byte, inserts [][]int) []byte {
	var code []byte
	code = binary.AppendUvarint(code, uint64(len(m.funcs)))
	for d, f := range m.funcs {
		body := make([]byte, 0, f.end-f.start+len(inserts[d])*len(checkpoint))
		pos := f.start
		for _, off := range inserts[d] {
			body = append(body, wasm[pos:off]...)
			body = append(body, checkpoint...)
			pos = off
		}
		body = append(body, wasm[pos:f.end]...)
		code = binary.AppendUvarint(code, uint64(len(body)))
		code = append(code, body...)
	}
	out := make([]byte, 0, len(wasm)+len(code)-(m.codeEnd-m.codeStart)+8)
	out = append(out, wasm[:m.codeStart]...)
	out = append(out, 10)
	out = binary.AppendUvarint(out, uint64(len(code)))
	out = append(out, code...)
	return append(out, wasm[m.codeEnd:]...)
}
