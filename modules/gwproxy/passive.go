package gwproxy

import (
	"sync"
	"sync/atomic"
	"time"
)

// host is the process-wide state of one target address: the failed round
// trips counted against it. Like reverse_proxy's hosts, it is shared by
// every proxy that dials the address and outlives config reloads while one
// of them uses it, so a change to the gateway does not forget failures.
type host struct {
	fails atomic.Int64
	refs  int // under hostsMu
}

var (
	hostsMu sync.Mutex
	hosts   = map[string]*host{}
)

// takeHost returns addr's state, counting one more user.
func takeHost(addr string) *host {
	hostsMu.Lock()
	defer hostsMu.Unlock()
	h := hosts[addr]
	if h == nil {
		h = new(host)
		hosts[addr] = h
	}
	h.refs++
	return h
}

// releaseHost forgets addr's state when its last user is gone.
func releaseHost(addr string) {
	hostsMu.Lock()
	defer hostsMu.Unlock()
	if h := hosts[addr]; h != nil {
		if h.refs--; h.refs <= 0 {
			delete(hosts, addr)
		}
	}
}

// passive is the passive health policy of one handler.
type passive struct {
	duration time.Duration
	max      int64
}

// down reports whether h's counted failures keep it out of rotation.
func (p *passive) down(h *host) bool {
	return p != nil && h.fails.Load() >= p.max
}

// fail counts a failure against h for the policy's duration.
func (p *passive) fail(h *host) {
	if p == nil {
		return
	}
	h.fails.Add(1)
	time.AfterFunc(p.duration, func() { h.fails.Add(-1) })
}
