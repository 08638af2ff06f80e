package router

import (
	"cmp"
	"maps"
	"math"
	"slices"
)

// With returns a table that has the given routes added or replaced (by id)
// and the routes with the ids in removed taken out. t itself is unchanged
// and keeps serving: the new table shares every unchanged route and every
// host bucket no change touches with t, and rebuilds only the buckets of
// the changed routes' old and new hosts. A change of a few routes costs
// about the size of their buckets, not of the table, and the two tables
// together hold little more than one. With many changes it builds a new
// table from scratch.
//
// An id both upserted and removed is upserted. Removing an id the table
// does not have is not an error.
func (t *Table) With(upserts []Route, removed []int64) (*Table, error) {
	if t == nil {
		t = &Table{}
	}
	if len(upserts) == 0 && len(removed) == 0 {
		return t, nil
	}
	fresh := make([]*entry, len(upserts))
	slab := make([]entry, len(upserts))
	for i := range upserts {
		if err := compileEntry(&slab[i], &upserts[i]); err != nil {
			return nil, err
		}
		fresh[i] = &slab[i]
	}
	// By id; of two upserts of one id the last wins.
	slices.SortStableFunc(fresh, func(a, b *entry) int { return cmp.Compare(a.route.ID, b.route.ID) })
	for i := len(fresh) - 2; i >= 0; i-- {
		if fresh[i].route.ID == fresh[i+1].route.ID {
			fresh = slices.Delete(fresh, i, i+1)
		}
	}
	if n := len(fresh) + len(removed); n > 64 && n > len(t.entries)/8 {
		return t.rebuild(fresh, removed)
	}

	nt := &Table{
		entries:         slices.Clone(t.entries),
		slots:           slices.Clone(t.slots),
		free:            slices.Clone(t.free),
		hosts:           t.hosts.shared(),
		any:             t.any,
		wildMaxPriority: t.wildMaxPriority,
		wildDots:        t.wildDots,
		services:        maps.Clone(t.services),
		primaries:       maps.Clone(t.primaries),
	}
	if nt.services == nil {
		nt.services, nt.primaries = map[int64]int32{}, map[int64]int32{}
	}
	// The buckets to rebuild: those of every leaving entry and of every
	// new one.
	touched := touchedBuckets{exact: map[string]bool{}, wild: map[string]bool{}}
	gone := map[*entry]bool{}
	leave := func(id int64) {
		i, ok := nt.find(id)
		if !ok {
			return
		}
		old := nt.entries[i]
		gone[old] = true
		touched.add(old)
		nt.count(old, -1)
		nt.entries = slices.Delete(nt.entries, i, i+1)
		nt.slots[old.slot] = nil
		nt.free = append(nt.free, old.slot)
	}
	for _, id := range removed {
		leave(id)
	}
	for _, e := range fresh {
		leave(e.route.ID)
	}
	for _, e := range fresh {
		nt.place(e)
		i, _ := nt.find(e.route.ID)
		nt.entries = slices.Insert(nt.entries, i, e)
		touched.add(e)
		nt.count(e, 1)
	}
	if t.entries == nil {
		nt.wildMaxPriority = math.MinInt32
	}
	// Old buckets name their entries by slot in t.
	for h := range touched.exact {
		rebuildBucket(&nt.hosts, h, hostExact, t.slots, fresh, gone, func(e *entry) bool { return e.hasHostKey(h, false) })
	}
	for s := range touched.wild {
		rebuildBucket(&nt.hosts, s, hostWildcard, t.slots, fresh, gone, func(e *entry) bool { return e.hasHostKey(s, true) })
	}
	for _, e := range fresh {
		e.eachHost(func(key string, wild bool) {
			if wild {
				nt.wildMaxPriority = max(nt.wildMaxPriority, e.route.Priority)
				nt.wildDots |= dotsBit(key)
			}
		})
	}
	if touched.none {
		b := newBuilder(hostNone, "")
		n := 0
		for _, e := range bucketEntries(&t.any, t.slots) {
			if !gone[e] {
				b.add(e)
				n++
			}
		}
		for _, e := range fresh {
			if !e.hasHosts() {
				b.add(e)
				n++
			}
		}
		nt.any = bucket{}
		if n > 0 {
			nt.any = b.freeze()
		}
	}
	return nt, nil
}

// place gives a new entry a slot in t: a free one, or a new one at the
// end. Only entries no other table holds are placed, so an entry's slot
// never changes.
func (t *Table) place(e *entry) {
	if k := len(t.free); k > 0 {
		e.slot = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		e.slot = int32(len(t.slots))
		t.slots = append(t.slots, nil)
	}
	t.slots[e.slot] = e
}

// touchedBuckets are the host keys whose buckets an update rebuilds.
type touchedBuckets struct {
	exact, wild map[string]bool
	none        bool
}

func (tb *touchedBuckets) add(e *entry) {
	if !e.hasHosts() {
		tb.none = true
	}
	e.eachHost(func(key string, wild bool) {
		if wild {
			tb.wild[key] = true
		} else {
			tb.exact[key] = true
		}
	})
}

// rebuildBucket rebuilds the bucket under key in x (the new table's index,
// which copies the shard it writes to) from its old entries that stay and
// the new entries that belong to it; an empty bucket is deleted. oldSlots
// resolves the old bucket's entries.
func rebuildBucket(x *hostIndex, key string, class hostClass, oldSlots []*entry, fresh []*entry, gone map[*entry]bool, belongs func(*entry) bool) {
	b := newBuilder(class, key)
	n := 0
	for _, e := range bucketEntries(x.get(key, class), oldSlots) {
		if !gone[e] {
			b.add(e)
			n++
		}
	}
	for _, e := range fresh {
		if belongs(e) {
			b.add(e)
			n++
		}
	}
	if n == 0 {
		x.remove(key, class)
		return
	}
	x.set(b.freeze())
}

// bucketEntries lists the entries of a frozen bucket (nil: none), each
// once, in id order; slots are those of the table the bucket belongs to.
func bucketEntries(b *bucket, slots []*entry) []*entry {
	if b == nil {
		return nil
	}
	var out []*entry
	for _, s := range b.slots() {
		out = append(out, slots[s])
	}
	// Insertion order does not change a frozen bucket (candidates are
	// sorted by rank, then id), but keep it stable for reproducible
	// layouts.
	slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.route.ID, b.route.ID) })
	return out
}

// rebuild is With for large changes: a new index over the merged entries
// (unchanged entries are reused, not compiled again, and keep their
// slots).
func (t *Table) rebuild(fresh []*entry, removed []int64) (*Table, error) {
	drop := make(map[int64]bool, len(removed)+len(fresh))
	for _, id := range removed {
		drop[id] = true
	}
	for _, e := range fresh {
		drop[e.route.ID] = true
	}
	nt := &Table{slots: slices.Clone(t.slots), free: slices.Clone(t.free)}
	entries := make([]*entry, 0, len(t.entries)+len(fresh))
	for _, e := range t.entries {
		if drop[e.route.ID] {
			nt.slots[e.slot] = nil
			nt.free = append(nt.free, e.slot)
			continue
		}
		entries = append(entries, e)
	}
	for _, e := range fresh {
		nt.place(e)
	}
	return build(append(entries, fresh...), nt.slots, nt.free)
}

// find returns the index of the entry with the route id, or where it
// would be inserted.
func (t *Table) find(id int64) (int, bool) {
	return slices.BinarySearchFunc(t.entries, id, func(e *entry, id int64) int { return cmp.Compare(e.route.ID, id) })
}

// Route returns the table's route with the id, or nil.
func (t *Table) Route(id int64) *Route {
	if t == nil {
		return nil
	}
	if i, ok := t.find(id); ok {
		return &t.entries[i].route
	}
	return nil
}

// Routes lists the table's routes in id order (a copy).
func (t *Table) Routes() []Route {
	if t == nil {
		return nil
	}
	out := make([]Route, len(t.entries))
	for i, e := range t.entries {
		out[i] = e.route
	}
	return out
}

// Services lists the ids of the services the table's routes reference,
// as service_id or in splits, sorted.
func (t *Table) Services() []int64 {
	if t == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(t.services))
}

// RoutesOfService reports how many of the table's routes have the
// service as their service_id.
func (t *Table) RoutesOfService(id int64) int {
	if t == nil {
		return 0
	}
	return int(t.primaries[id])
}
