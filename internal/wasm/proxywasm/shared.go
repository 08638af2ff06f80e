package proxywasm

import (
	"context"
	"sync"

	"github.com/caddyserver/caddy/v2"
)

// Shared data is kept per VM id for the process: every instance of every
// plugin with the same VM id (the gateway uses the module's name) sees the
// same store, across config reloads (the new config's plugins take it
// before the old config's let it go). The store lives as long as a plugin
// uses it, as Caddy's reverse_proxy keeps its hosts: once the last plugin
// of a VM id is closed (its module deleted, or no longer used by any
// plugin), the data is freed. Bounded per VM id.
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
	// logs is the module's log budget: its plugins' entries together.
	logs logBudget
}

type metric struct {
	kind  uint32
	value int64
}

// sharedStores are the stores in use, by VM id.
var sharedStores = caddy.NewUsagePool()

// acquireShared returns the store of vmID, counting one more user;
// releaseShared gives it back.
func acquireShared(vmID string) *sharedStore {
	v, _, _ := sharedStores.LoadOrNew(vmID, func() (caddy.Destructor, error) { return newSharedStore(), nil })
	return v.(*sharedStore)
}

// releaseShared counts one user of vmID's store less; the last one frees it.
func releaseShared(vmID string) { _, _ = sharedStores.Delete(vmID) }

// Destruct implements caddy.Destructor: nothing to close, the store is
// garbage once the pool forgets it.
func (s *sharedStore) Destruct() error { return nil }

func hostGetSharedData(ctx context.Context, in *Instance, a []uint64) Status {
	key, ok := in.read(u32(a[0]), u32(a[1]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	val, cas, found := in.plugin.shared.get(key)
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
	return in.plugin.shared.set(key, val, u32(a[4]))
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
	// names are kept for the VM id's life: bounded like shared data keys
	// (1024 names of up to 64 MiB each would be 64 GiB of the gateway's
	// heap)
	if len(name) > maxSharedKeySize {
		return StatusBadArgument
	}
	id, st := in.plugin.shared.defineMetric(name, kind)
	if st != StatusOK {
		return st
	}
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
	m := s.metric(id)
	switch {
	case m == nil:
		return StatusNotFound
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
	s := in.plugin.shared
	s.mu.Lock()
	m := s.metric(u32(a[0]))
	var v int64
	if m != nil {
		v = m.value
	}
	s.mu.Unlock()
	if m == nil {
		return StatusNotFound
	}
	if !in.mem.WriteUint64Le(u32(a[1]), uint64(v)) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

// get returns key's value and cas.
func (s *sharedStore) get(key []byte) (val []byte, cas uint32, found bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, found := s.m[string(key)]
	if !found {
		return nil, 0, false
	}
	return e.value, e.cas, true
}

// set stores a copy of val under key unless cas (non-zero) is not the
// current one or the store is full, and counts up the key's cas.
func (s *sharedStore) set(key, val []byte, cas uint32) Status {
	if len(key) > maxSharedKeySize || len(val) > maxSharedValueSize {
		return StatusBadArgument
	}
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

// defineMetric returns the id of the metric name, defined with kind when
// new (ids count from 1).
func (s *sharedStore) defineMetric(name []byte, kind uint32) (uint32, Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, found := s.metricIDs[string(name)]; found {
		return id, StatusOK
	}
	if len(s.metrics) >= maxMetrics {
		return 0, StatusInternalFailure
	}
	s.metrics = append(s.metrics, metric{kind: kind})
	id := uint32(len(s.metrics))
	s.metricIDs[string(name)] = id
	return id, StatusOK
}

// metric is the metric with id, or nil; s.mu is held.
func (s *sharedStore) metric(id uint32) *metric {
	if id == 0 || int(id) > len(s.metrics) {
		return nil
	}
	return &s.metrics[id-1]
}

func newSharedStore() *sharedStore {
	return &sharedStore{m: map[string]*sharedEntry{}, metricIDs: map[string]uint32{}}
}
