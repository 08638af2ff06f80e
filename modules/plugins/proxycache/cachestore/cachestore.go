// Package cachestore is the proxy-cache plugin's response store: in memory,
// bounded by total bytes and by number of entries, least recently used
// first out, with a TTL per entry.
//
// The plugin's instances share a Store held in a usage pool beside the
// plugin (proxycache/state.go), so cached responses survive config reloads
// and POST /api/v1/cache/purge can empty it.
package cachestore

import (
	"container/list"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Default bounds of the process-wide store.
const (
	DefaultMaxBytes   = 128 << 20
	DefaultMaxEntries = 50000
)

// Entry is one cached response, or a variant index (Vary) when VaryNames is
// non-nil.
type Entry struct {
	Status  int
	Header  http.Header
	Body    []byte
	Stored  time.Time
	Expires time.Time
	// VaryNames, for a variant index entry, are the canonical names of the
	// request headers the response varies on (its Vary header).
	VaryNames []string
}

// size approximates the memory an entry takes.
func (e *Entry) size(key string) int64 {
	n := int64(len(key) + len(e.Body) + 128)
	for k, vs := range e.Header {
		n += int64(len(k))
		for _, v := range vs {
			n += int64(len(v) + 16)
		}
	}
	for _, v := range e.VaryNames {
		n += int64(len(v) + 16)
	}
	return n
}

// Store is an LRU cache. Safe for concurrent use.
type Store struct {
	mu         sync.Mutex
	maxBytes   int64
	maxEntries int
	ll         *list.List // front: most recently used
	m          map[string]*list.Element
	bytes      int64
	responses  int // entries that are responses (not variant indexes)
	now        func() time.Time
}

type item struct {
	key  string
	e    *Entry
	size int64
}

// New returns a store bounded by maxBytes and maxEntries (defaults when ≤ 0).
func New(maxBytes int64, maxEntries int) *Store {
	s := &Store{ll: list.New(), m: map[string]*list.Element{}, now: time.Now}
	s.SetLimits(maxBytes, maxEntries)
	return s
}

// SetLimits changes the bounds (defaults when ≤ 0), evicting as needed.
func (s *Store) SetLimits(maxBytes int64, maxEntries int) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxBytes, s.maxEntries = maxBytes, maxEntries
	s.evict(0, 0)
}

// MaxEntryBytes is the size of the largest entry Set accepts (a quarter
// of the byte bound), for callers that gather an entry before storing it.
func (s *Store) MaxEntryBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxBytes / 4
}

// Get returns the live entry under key. Expired entries are removed.
func (s *Store) Get(key string) (*Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.m[key]
	if !ok {
		return nil, false
	}
	it := el.Value.(*item)
	if !s.now().Before(it.e.Expires) {
		s.remove(el)
		return nil, false
	}
	s.ll.MoveToFront(el)
	return it.e, true
}

// Set stores e under key, replacing what was there, and evicts least
// recently used entries beyond the bounds. An entry larger than a quarter of
// the byte bound is refused (false).
func (s *Store) Set(key string, e *Entry) bool {
	size := e.size(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if size > s.maxBytes/4 {
		return false
	}
	if el, ok := s.m[key]; ok {
		s.remove(el)
	}
	s.evict(size, 1)
	el := s.ll.PushFront(&item{key: key, e: e, size: size})
	s.m[key] = el
	s.bytes += size
	if e.VaryNames == nil {
		s.responses++
	}
	return true
}

// evict removes entries until extraBytes and extraEntries more fit: expired
// ones at the back first, then the least recently used.
func (s *Store) evict(extraBytes int64, extraEntries int) {
	for s.ll.Len() > 0 && (s.bytes+extraBytes > s.maxBytes || s.ll.Len()+extraEntries > s.maxEntries) {
		s.remove(s.ll.Back())
	}
}

func (s *Store) remove(el *list.Element) {
	it := el.Value.(*item)
	s.ll.Remove(el)
	delete(s.m, it.key)
	s.bytes -= it.size
	if it.e.VaryNames == nil {
		s.responses--
	}
}

// Delete removes key.
func (s *Store) Delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.m[key]; ok {
		s.remove(el)
	}
}

// Purge removes every entry and returns how many cached responses were
// removed (variant indexes are not counted).
func (s *Store) Purge() int {
	return s.PurgePrefix("")
}

// PurgePrefix removes the entries whose key starts with prefix and returns
// how many cached responses were removed.
func (s *Store) PurgePrefix(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for el := s.ll.Front(); el != nil; {
		next := el.Next()
		it := el.Value.(*item)
		if strings.HasPrefix(it.key, prefix) {
			if it.e.VaryNames == nil {
				n++
			}
			s.remove(el)
		}
		el = next
	}
	return n
}

// Stats are the store's current figures.
type Stats struct {
	Entries    int   `json:"entries"` // cached responses
	Keys       int   `json:"keys"`    // responses and variant indexes
	Bytes      int64 `json:"bytes"`
	MaxBytes   int64 `json:"max_bytes"`
	MaxEntries int   `json:"max_entries"`
}

// Stats returns the store's current figures.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Entries: s.responses, Keys: s.ll.Len(), Bytes: s.bytes, MaxBytes: s.maxBytes, MaxEntries: s.maxEntries}
}

// Len is the number of cached responses.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.responses
}
