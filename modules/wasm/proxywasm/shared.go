package proxywasm

import (
	"context"
	"sync"
)

// Shared data is process-wide, keyed by VM id: every instance of every
// plugin with the same VM id (the gateway uses the module's name) sees the
// same store, across config reloads. Bounded per VM id.
const (
	maxSharedKeys      = 1 << 16
	maxSharedValueSize = 1 << 20
	maxSharedKeySize   = 4 << 10
	maxSharedBytes     = 64 << 20 // keys and values of one VM id
)

type sharedEntry struct {
	value []byte
	cas   uint32
}

type sharedStore struct {
	mu    sync.Mutex
	m     map[string]*sharedEntry
	bytes int // keys and values stored
	// metrics: simple in-process counters and gauges
	metricIDs map[string]uint32
	metrics   []metric
}

type metric struct {
	kind  uint32
	value int64
}

var shared = struct {
	mu sync.Mutex
	m  map[string]*sharedStore
}{m: map[string]*sharedStore{}}

func sharedFor(vmID string) *sharedStore {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	s, ok := shared.m[vmID]
	if !ok {
		s = newSharedStore()
		shared.m[vmID] = s
	}
	return s
}

func hostGetSharedData(ctx context.Context, in *Instance, a []uint64) Status {
	key, ok := in.read(u32(a[0]), u32(a[1]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	s := in.plugin.shared
	s.mu.Lock()
	e, found := s.m[string(key)]
	var val []byte
	var cas uint32
	if found {
		val, cas = e.value, e.cas
	}
	s.mu.Unlock()
	if !found {
		return StatusNotFound
	}
	// val is never modified in place (a set stores a fresh slice)
	if st := in.returnBytes(ctx, val, u32(a[2]), u32(a[3])); st != StatusOK {
		return st
	}
	if !in.writeU32(u32(a[4]), cas) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hostSetSharedData(_ context.Context, in *Instance, a []uint64) Status {
	key, ok1 := in.read(u32(a[0]), u32(a[1]))
	val, ok2 := in.read(u32(a[2]), u32(a[3]))
	if !ok1 || !ok2 {
		return StatusInvalidMemoryAccess
	}
	if len(key) > maxSharedKeySize || len(val) > maxSharedValueSize {
		return StatusBadArgument
	}
	cas := u32(a[4])
	s := in.plugin.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	e, found := s.m[string(key)]
	if found && cas != 0 && cas != e.cas {
		return StatusCASMismatch
	}
	grow := len(val)
	if found {
		grow -= len(e.value)
	} else {
		grow += len(key)
	}
	if (!found && len(s.m) >= maxSharedKeys) || s.bytes+grow > maxSharedBytes {
		return StatusInternalFailure // the store is full
	}
	if !found {
		e = &sharedEntry{}
		s.m[string(key)] = e
	}
	s.bytes += grow
	e.value = append([]byte(nil), val...)
	e.cas++
	if e.cas == 0 {
		e.cas = 1
	}
	return StatusOK
}

const maxMetrics = 1024

func hostDefineMetric(_ context.Context, in *Instance, a []uint64) Status {
	kind := u32(a[0])
	if kind > 2 {
		return StatusBadArgument
	}
	name, ok := in.read(u32(a[1]), u32(a[2]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	s := in.plugin.shared
	s.mu.Lock()
	id, found := s.metricIDs[string(name)]
	if !found {
		if len(s.metrics) >= maxMetrics {
			s.mu.Unlock()
			return StatusInternalFailure
		}
		s.metrics = append(s.metrics, metric{kind: kind})
		id = uint32(len(s.metrics))
		s.metricIDs[string(name)] = id
	}
	s.mu.Unlock()
	if !in.writeU32(u32(a[3]), id) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func metricOp(in *Instance, id uint32, v int64, record bool) Status {
	if in == nil {
		return StatusInternalFailure
	}
	s := in.plugin.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == 0 || int(id) > len(s.metrics) {
		return StatusNotFound
	}
	m := &s.metrics[id-1]
	switch {
	case record:
		m.value = v
	case m.kind == 0 && v < 0:
		return StatusBadArgument // counters only go up
	default:
		m.value += v
	}
	return StatusOK
}

func hostGetMetric(_ context.Context, in *Instance, a []uint64) Status {
	id := u32(a[0])
	s := in.plugin.shared
	s.mu.Lock()
	if id == 0 || int(id) > len(s.metrics) {
		s.mu.Unlock()
		return StatusNotFound
	}
	v := s.metrics[id-1].value
	s.mu.Unlock()
	if !in.mem.WriteUint64Le(u32(a[1]), uint64(v)) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func newSharedStore() *sharedStore {
	return &sharedStore{m: map[string]*sharedEntry{}, metricIDs: map[string]uint32{}}
}
