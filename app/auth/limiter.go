package auth

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/internal/clientid"
	"github.com/caddy-gateway/gateway/storage"
)

// Failed-login limiting (docs/auth.md): after loginMaxFailures failures from
// one client within loginWindow, every login attempt from it is answered 429
// with Retry-After until the oldest of those failures leaves the window (a
// sliding window over the last loginMaxFailures failures). A successful
// login does not reset the count, so one known account cannot be used to
// keep guessing another. IPv6 clients are counted per /64 (one subscriber's
// whole prefix). The failures are rows of the store (login_failures), so
// every node of a cluster counts the same failures: 10 failures spread over
// any nodes block the client on all of them. The table is bounded: a
// client keeps at most its last loginMaxFailures rows, rows leave when
// they leave the window, and a failure older than the last limiterCap
// recorded ones goes.
const (
	loginMaxFailures = 10
	loginWindow      = 15 * time.Minute
	limiterCap       = 100000
	pruneBatch       = 100 // the most expired (or over-cap) rows one failure removes
)

type limiter struct {
	max    int
	window time.Duration
	cap    int
	now    func() time.Time

	mu    sync.Mutex
	turns map[string]*turn // the clients with an attempt under way here
}

// turn serialises one client's login attempts in this process.
type turn struct {
	sync.Mutex
	waiting int // attempts holding or waiting for the turn
}

func newLimiter(max int, window time.Duration, capacity int) *limiter {
	return &limiter{max: max, window: window, cap: capacity, now: time.Now, turns: map[string]*turn{}}
}

// lock waits until no other login attempt of key runs in this process and
// returns its unlock. An attempt checks blocked, verifies the password and
// records a failure under the lock, so concurrent guesses of one client
// cannot all pass the check before any failure is recorded (each would
// otherwise get a password check: N at once, N guesses past the limit).
// Across the nodes of a cluster each node serialises its own attempts and
// checks the shared table: a client spreading concurrent guesses over k
// nodes gets at most k-1 guesses past the limit.
func (l *limiter) lock(key string) (unlock func()) {
	l.mu.Lock()
	t := l.turns[key]
	if t == nil {
		t = &turn{}
		l.turns[key] = t
	}
	t.waiting++
	l.mu.Unlock()
	t.Lock()
	return func() {
		t.Unlock()
		l.mu.Lock()
		if t.waiting--; t.waiting == 0 {
			delete(l.turns, key)
		}
		l.mu.Unlock()
	}
}

// blocked reports whether key may not try now, and for how long.
func (l *limiter) blocked(db *gorm.DB, key string) (time.Duration, bool, error) {
	now := l.now().UTC()
	var at []time.Time
	err := db.Model(&storage.LoginFailure{}).Where("client_key = ? AND at > ?", key, now.Add(-l.window)).
		Order("at DESC").Limit(l.max).Pluck("at", &at).Error
	if err != nil {
		return 0, false, fmt.Errorf("reading failed logins: %w", err)
	}
	if len(at) < l.max {
		return 0, false, nil
	}
	return at[l.max-1].Add(l.window).Sub(now), true, nil
}

// admit is nil when key may try now, else the 429 answer with Retry-After.
func (l *limiter) admit(c *api.Call, db *gorm.DB, key string) error {
	wait, blocked, err := l.blocked(db, key)
	if err != nil {
		return err
	}
	if blocked {
		c.W.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		return &api.APIError{Status: http.StatusTooManyRequests, Msg: "too many failed logins from this address; try again later"}
	}
	return nil
}

// fail records a failed attempt of key and trims the table, each step
// through an index (storage.LoginFailure) and bounded: this client's rows
// beyond its last max; at most pruneBatch rows out of the window; at most
// pruneBatch rows older than the last cap recorded failures (ids grow with
// every failure, so those are the rows with id <= the new id - cap). Each
// failure adds one row and may remove up to pruneBatch expired ones, so
// expired rows cannot pile up, and the table never holds more than cap
// rows.
func (l *limiter) fail(db *gorm.DB, key string) error {
	now := l.now().UTC()
	return db.Transaction(func(tx *gorm.DB) error {
		row := &storage.LoginFailure{ClientKey: key, At: now}
		if err := tx.Create(row).Error; err != nil {
			return fmt.Errorf("recording a failed login: %w", err)
		}
		model := func() *gorm.DB { return tx.Model(&storage.LoginFailure{}).Select("id") }
		for _, q := range []*gorm.DB{
			tx.Where("client_key = ? AND id NOT IN (?)", key,
				model().Where("client_key = ?", key).Order("at DESC, id DESC").Limit(l.max)),
			tx.Where("id IN (?)", model().Where("at <= ?", now.Add(-l.window)).Limit(pruneBatch)),
			tx.Where("id IN (?)", model().Where("id <= ?", row.ID-int64(l.cap)).Limit(pruneBatch)),
		} {
			if err := q.Delete(&storage.LoginFailure{}).Error; err != nil {
				return fmt.Errorf("pruning failed logins: %w", err)
			}
		}
		return nil
	})
}

// clientKey is the limiter's key of the client of r (trusted_proxies
// honoured).
func clientKey(r *http.Request, db *gorm.DB) string {
	return clientid.Key(clientIP(r, settingsRow(db).TrustedProxies), clientid.DefaultIPv6Prefix)
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
