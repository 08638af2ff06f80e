package router

import (
	"hash/maphash"
	"maps"
)

// hostShards is the number of maps a host index is split into. An update
// copies only the maps of the hosts it touches, so at 50,000 routes a
// route change copies a few hundred map entries instead of tens of
// thousands; a lookup pays one hash more.
const hostShards = 64

var hostSeed = maphash.MakeSeed()

// hostIndex maps normalized hosts (or wildcard suffixes) to their buckets.
// It is a value: a copy shares every shard map with the original, and
// set copies a shard before it writes to it when the shard is shared.
type hostIndex struct {
	shards [hostShards]map[string]bucket
	owned  [hostShards]bool // shards this index may write to
	n      int
}

func shardOf(key string) int { return int(maphash.String(hostSeed, key) % hostShards) }

func (x *hostIndex) get(key string) (bucket, bool) {
	b, ok := x.shards[shardOf(key)][key]
	return b, ok
}

// set stores b under key (copying the shard first if it is shared).
func (x *hostIndex) set(key string, b bucket) {
	m := x.own(shardOf(key))
	if _, ok := m[key]; !ok {
		x.n++
	}
	m[key] = b
}

func (x *hostIndex) remove(key string) {
	i := shardOf(key)
	if _, ok := x.shards[i][key]; !ok {
		return
	}
	delete(x.own(i), key)
	x.n--
}

// own makes shard i this index's own and returns it.
func (x *hostIndex) own(i int) map[string]bucket {
	if !x.owned[i] {
		x.shards[i] = maps.Clone(x.shards[i])
		if x.shards[i] == nil {
			x.shards[i] = map[string]bucket{}
		}
		x.owned[i] = true
	}
	return x.shards[i]
}

// shared is a copy of x whose shards are all shared with x: writes to the
// copy copy the shards they touch.
func (x *hostIndex) shared() hostIndex {
	c := *x
	c.owned = [hostShards]bool{}
	return c
}
