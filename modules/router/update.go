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
		exact:           t.exact.shared(),
		wild:            t.wild.shared(),
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
	}
	for _, id := range removed {
		leave(id)
	}
	for _, e := range fresh {
		leave(e.route.ID)
		i, _ := nt.find(e.route.ID)
		nt.entries = slices.Insert(nt.entries, i, e)
		touched.add(e)
		nt.count(e, 1)
	}
	if t.entries == nil {
		nt.wildMaxPriority = math.MinInt32
	}
	for h := range touched.exact {
		rebuildBucket(&nt.exact, h, hostExact, 0, fresh, gone, func(e *entry) bool { return e.hasHostKey(h, false) })
	}
	for s := range touched.wild {
		rebuildBucket(&nt.wild, s, hostWildcard, len(s), fresh, gone, func(e *entry) bool { return e.hasHostKey(s, true) })
	}
	for _, e := range fresh {
		e.eachHost(func(key string, wild bool) {
			if wild {
				nt.wildMaxPriority = max(nt.wildMaxPriority, e.priority)
				nt.wildDots |= dotsBit(key)
			}
		})
	}
	if touched.none {
		b := newBuilder(hostNone, 0)
		n := 0
		for _, e := range bucketEntries(&t.any) {
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
// the new entries that belong to it; an empty bucket is deleted.
func rebuildBucket(x *hostIndex, key string, class hostClass, suffixLen int, fresh []*entry, gone map[*entry]bool, belongs func(*entry) bool) {
	b := newBuilder(class, suffixLen)
	n := 0
	if old, ok := x.get(key); ok {
		for _, e := range bucketEntries(&old) {
			if !gone[e] {
				b.add(e)
				n++
			}
		}
	}
	for _, e := range fresh {
		if belongs(e) {
			b.add(e)
			n++
		}
	}
	if n == 0 {
		x.remove(key)
		return
	}
	x.set(key, b.freeze())
}

// bucketEntries lists the entries of a frozen bucket, each once, in the
// order they were added.
func bucketEntries(b *bucket) []*entry {
	seen := make(map[*entry]bool, len(b.literal)+len(b.regex))
	var out []*entry
	for i := range b.literal {
		if e := b.literal[i].e; !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	for i := range b.regex {
		if e := b.regex[i].e; !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	// Insertion order does not change a frozen bucket (candidates are
	// sorted by rank, then id), but keep it stable for reproducible
	// layouts.
	slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.route.ID, b.route.ID) })
	return out
}

// rebuild is With for large changes: a new index over the merged entries
// (unchanged entries are reused, not compiled again).
func (t *Table) rebuild(fresh []*entry, removed []int64) (*Table, error) {
	drop := make(map[int64]bool, len(removed)+len(fresh))
	for _, id := range removed {
		drop[id] = true
	}
	for _, e := range fresh {
		drop[e.route.ID] = true
	}
	entries := make([]*entry, 0, len(t.entries)+len(fresh))
	for _, e := range t.entries {
		if !drop[e.route.ID] {
			entries = append(entries, e)
		}
	}
	return build(append(entries, fresh...))
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
