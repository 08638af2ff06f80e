package auth

import (
	"container/list"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Failed-login limiting (docs/auth.md): after loginMaxFailures failures from
// one client within loginWindow, every login attempt from it is answered 429
// with Retry-After until the oldest of those failures leaves the window (a
// sliding window over the last loginMaxFailures failures). A successful
// login does not reset the count, so one known account cannot be used to
// keep guessing another. IPv6 clients are counted per /64 (one subscriber's
// whole prefix). Memory is bounded: at most limiterCap clients are tracked;
// entries whose failures all left the window are dropped as they age, and
// when the table is full the client with the oldest last failure goes.
const (
	loginMaxFailures = 10
	loginWindow      = 15 * time.Minute
	limiterCap       = 10000
)

type limiter struct {
	mu      sync.Mutex
	max     int
	window  time.Duration
	cap     int
	now     func() time.Time
	entries map[string]*list.Element
	order   *list.List // of *limEntry, most recent failure first
}

type limEntry struct {
	key   string
	fails []time.Time // ascending, at most max
}

func newLimiter(max int, window time.Duration, capacity int) *limiter {
	return &limiter{max: max, window: window, cap: capacity, now: time.Now,
		entries: map[string]*list.Element{}, order: list.New()}
}

// expireLocked drops entries whose last failure left the window (they sit
// at the back: the list is ordered by last failure).
func (l *limiter) expireLocked(now time.Time) {
	for e := l.order.Back(); e != nil; e = l.order.Back() {
		le := e.Value.(*limEntry)
		if now.Sub(le.fails[len(le.fails)-1]) < l.window {
			return
		}
		l.order.Remove(e)
		delete(l.entries, le.key)
	}
}

func (l *limiter) pruneLocked(le *limEntry, now time.Time) {
	i := 0
	for i < len(le.fails) && now.Sub(le.fails[i]) >= l.window {
		i++
	}
	le.fails = le.fails[i:]
}

// blocked reports whether key may not try now, and for how long.
func (l *limiter) blocked(key string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.expireLocked(now)
	e, ok := l.entries[key]
	if !ok {
		return 0, false
	}
	le := e.Value.(*limEntry)
	l.pruneLocked(le, now)
	if len(le.fails) < l.max {
		return 0, false
	}
	return le.fails[len(le.fails)-l.max].Add(l.window).Sub(now), true
}

// fail records a failed attempt of key.
func (l *limiter) fail(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.expireLocked(now)
	var le *limEntry
	if e, ok := l.entries[key]; ok {
		le = e.Value.(*limEntry)
		l.pruneLocked(le, now)
		l.order.MoveToFront(e)
	} else {
		le = &limEntry{key: key}
		l.entries[key] = l.order.PushFront(le)
		for len(l.entries) > l.cap {
			old := l.order.Back()
			l.order.Remove(old)
			delete(l.entries, old.Value.(*limEntry).key)
		}
	}
	le.fails = append(le.fails, now)
	if len(le.fails) > l.max {
		le.fails = append(le.fails[:0], le.fails[len(le.fails)-l.max:]...)
	}
}

func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// limitKey is the limiter's key for a client address: the address itself,
// or the /64 of an IPv6 address.
func limitKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// clientIP is the peer address, or, when the peer is one of the settings'
// trusted_proxies, the first untrusted address of X-Forwarded-For read from
// the right (the proxy router's rule).
func clientIP(r *http.Request, trustedProxies []string) string {
	host := r.RemoteAddr
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		host = ap.Addr().Unmap().String()
	}
	var trusted []netip.Prefix
	for _, t := range trustedProxies {
		if p, err := netip.ParsePrefix(t); err == nil {
			trusted = append(trusted, p.Masked())
		} else if a, err := netip.ParseAddr(t); err == nil {
			trusted = append(trusted, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		}
	}
	isTrusted := func(a netip.Addr) bool {
		a = a.Unmap()
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	peer, err := netip.ParseAddr(host)
	if len(trusted) == 0 || err != nil || !isTrusted(peer) {
		return host
	}
	client := host
	xff := r.Header.Values("X-Forwarded-For")
	for i := len(xff) - 1; i >= 0; i-- {
		parts := strings.Split(xff[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return client
			}
			client = a.Unmap().String()
			if !isTrusted(a) {
				return client
			}
		}
	}
	return client
}
