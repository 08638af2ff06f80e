package router

import (
	"hash/maphash"
	"slices"
	"unsafe"
)

// hostShards is the number of slot arrays a host index is split into. An
// update copies only the shards of the hosts it touches, so at 50,000
// routes a route change copies a few hundred slots instead of tens of
// thousands.
const hostShards = 64

var hostSeed = maphash.MakeSeed()

// hostIndex maps host keys (normalized exact hosts, and ".suffix" for
// wildcard hosts, told apart by the bucket's class) to their buckets. Each
// shard is an open-addressing table with linear probing over one flat
// array of 32-byte slots, at most half full (a lookup of an absent key
// probes 2.5 slots on average, about one cache line): a slot carries the
// key's full hash, so a lookup compares the key only on a hash match,
// reading it from the bucket's blob, which a hit reads next anyway. (A Go map costs a
// control word, a slot, the key's bytes and the value: four cache misses
// per lookup when the table is cold.)
//
// It is a value: a copy shares every shard with the original, and set and
// remove copy a shard before they write to it when the shard is shared.
type hostIndex struct {
	shards [hostShards]hostShard
	owned  [hostShards]bool // shards this index may write to
	n      int
}

type hostShard struct {
	slots []hostSlot // a power of two long, or nil
	n     int
}

type hostSlot struct {
	hash uint64
	b    bucket // empty: a free slot
}

func hostHash(key string, class hostClass) uint64 {
	h := maphash.String(hostSeed, key)
	if class == hostWildcard {
		h = ^h
	}
	return h
}

// get returns the bucket under key and class, or nil. The pointer is into
// the index's (immutable once published) slot array.
func (x *hostIndex) get(key string, class hostClass) *bucket {
	h := hostHash(key, class)
	s := &x.shards[h%hostShards]
	if s.n == 0 {
		return nil
	}
	mask := uint64(len(s.slots) - 1)
	for i := (h / hostShards) & mask; ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if sl.b.empty() {
			return nil
		}
		if sl.hash == h && sl.b.class() == class && sl.b.key() == key {
			return &sl.b
		}
	}
}

// set stores b under its key and class (copying the shard first if it is
// shared).
func (x *hostIndex) set(b bucket) {
	h := hostHash(b.key(), b.class())
	s := x.own(int(h % hostShards))
	if (s.n+1)*2 > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := (h / hostShards) & mask; ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if sl.b.empty() {
			*sl = hostSlot{h, b}
			s.n++
			x.n++
			return
		}
		if sl.hash == h && sl.b.class() == b.class() && sl.b.key() == b.key() {
			sl.b = b
			return
		}
	}
}

// remove deletes the bucket under key and class, if any.
func (x *hostIndex) remove(key string, class hostClass) {
	h := hostHash(key, class)
	shard := int(h % hostShards)
	if x.shards[shard].n == 0 {
		return
	}
	mask := uint64(len(x.shards[shard].slots) - 1)
	i := (h / hostShards) & mask
	for {
		sl := &x.shards[shard].slots[i]
		if sl.b.empty() {
			return
		}
		if sl.hash == h && sl.b.class() == class && sl.b.key() == key {
			break
		}
		i = (i + 1) & mask
	}
	s := x.own(shard)
	// Backward-shift deletion: move later slots of the probe run into the
	// hole when their home position allows, so that no lookup stops early
	// at the hole.
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		sl := &s.slots[j]
		if sl.b.empty() {
			break
		}
		home := (sl.hash / hostShards) & mask
		// The slot at j may move to i when its home is not in (i, j]
		// (cyclically).
		if (j-home)&mask >= (j-i)&mask {
			s.slots[i] = *sl
			i = j
		}
	}
	s.slots[i] = hostSlot{}
	s.n--
	x.n--
}

// grow doubles the shard's slot array (8 slots at first).
func (s *hostShard) grow() {
	old := s.slots
	s.slots = make([]hostSlot, max(8, 2*len(old)))
	mask := uint64(len(s.slots) - 1)
	for _, sl := range old {
		if sl.b.empty() {
			continue
		}
		i := (sl.hash / hostShards) & mask
		for !s.slots[i].b.empty() {
			i = (i + 1) & mask
		}
		s.slots[i] = sl
	}
}

// own makes shard i this index's own and returns it.
func (x *hostIndex) own(i int) *hostShard {
	if !x.owned[i] {
		x.shards[i].slots = slices.Clone(x.shards[i].slots)
		x.owned[i] = true
	}
	return &x.shards[i]
}

// shared is a copy of x whose shards are all shared with x: writes to the
// copy copy the shards they touch.
func (x *hostIndex) shared() hostIndex {
	c := *x
	c.owned = [hostShards]bool{}
	return c
}

// The slot size the layout above counts on.
var _ [32 - unsafe.Sizeof(hostSlot{})]struct{}
