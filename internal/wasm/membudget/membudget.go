// Package membudget bounds the linear memory of many WebAssembly instances
// together. Each instance is capped on its own (proxywasm.MaxMemoryPages),
// but a plugin keeps a pool of instances and a gateway runs many plugins:
// 64 instances of a module that grows to its 64 MiB cap hold 4 GiB, idle
// ones included, since linear memory never shrinks. A Budget is a wazero
// memory allocator that charges every instance's memory to one shared
// limit: past it, memory.grow fails in the guest (it gets -1, and a module
// whose allocator cannot cope traps, which fails only its request), and
// proxywasm starts no new instance until memory is given back.
package membudget

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// DefaultLimit is the process budget unless configured otherwise (the
// gateway app's wasm_memory_limit): 16 instances at their 64 MiB cap, or
// hundreds of typical ones (a Rust or TinyGo filter starts at 1 to 4 MiB).
const DefaultLimit = 1 << 30

// Default is the process's budget, shared by every module instance the
// gateway starts.
var Default = New(DefaultLimit)

// Budget is a limit on the sum of the linear memories it allocates. It is
// safe for concurrent use; each memory it hands out belongs to one
// instance, which wazero grows from one goroutine at a time.
type Budget struct {
	limit atomic.Int64
	used  atomic.Int64
}

// New returns a budget of limit bytes.
func New(limit int64) *Budget {
	b := new(Budget)
	b.SetLimit(limit)
	return b
}

// SetLimit changes the limit (a reload with another configuration).
// Memory already held beyond a lower limit stays until it is freed.
func (b *Budget) SetLimit(limit int64) { b.limit.Store(limit) }

// Limit is the limit in bytes.
func (b *Budget) Limit() int64 { return b.limit.Load() }

// Used is how many bytes the budget's memories hold.
func (b *Budget) Used() int64 { return b.used.Load() }

// Room reports whether n more bytes fit. proxywasm asks it before it
// starts an instance, whose initial memory is always granted (wazero
// cannot start an instance with less than its declared minimum).
func (b *Budget) Room(n int64) bool { return b.used.Load()+n <= b.limit.Load() }

// Pressed reports whether more than three quarters of the budget are in
// use: pools then close instances given back instead of keeping them
// idle, so the memory of idle instances goes to requests in flight.
func (b *Budget) Pressed() bool { return b.used.Load() > b.limit.Load()/4*3 }

// Allocate implements experimental.MemoryAllocator; max is the instance's
// own cap. The capacity hint is ignored: memory is charged as it grows.
func (b *Budget) Allocate(_, max uint64) experimental.LinearMemory {
	return &memory{budget: b, max: max}
}

// charge takes n bytes from the budget, or none when they do not fit.
func (b *Budget) charge(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit.Load() {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// memory is one instance's linear memory. Its capacity is what it is
// charged: the bytes it really holds, not its length.
type memory struct {
	budget  *Budget
	max     uint64
	buf     []byte
	charged int64
}

// Reallocate implements experimental.LinearMemory: it grows the memory to
// size bytes, or returns nil when that exceeds the instance's cap or the
// budget. The first call (the instance's initial memory) always succeeds.
func (m *memory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if m.buf == nil { // the initial memory
		m.buf = make([]byte, size)
		m.charged = int64(size)
		m.budget.used.Add(m.charged)
		return m.buf
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	// Room to grow, as append would leave (wasm allocators grow a few
	// pages at a time: copying the whole memory each time would be
	// quadratic), within the instance's cap; without room to spare in the
	// budget, exactly what was asked.
	newCap := min(max(size, uint64(cap(m.buf))*2), m.max)
	if !m.budget.charge(int64(newCap) - m.charged) {
		newCap = size
		if !m.budget.charge(int64(newCap) - m.charged) {
			return nil
		}
	}
	buf := make([]byte, size, newCap)
	copy(buf, m.buf)
	m.buf = buf
	m.charged = int64(newCap)
	return m.buf
}

// Free implements experimental.LinearMemory: the instance is closed.
func (m *memory) Free() {
	m.budget.used.Add(-m.charged)
	m.charged = 0
	m.buf = nil
}

// Interface guards
var (
	_ experimental.MemoryAllocator = (*Budget)(nil)
	_ experimental.LinearMemory    = (*memory)(nil)
)
