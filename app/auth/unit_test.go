package auth

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/internal/clientid"
	"github.com/caddy-gateway/gateway/storage"
)

func limiterStore(t *testing.T) *gorm.DB {
	st, err := storage.Open("sqlite", filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st.DB
}

func failures(t *testing.T, db *gorm.DB, key string) int64 {
	var n int64
	q := db.Model(&storage.LoginFailure{})
	if key != "" {
		q = q.Where("client_key = ?", key)
	}
	if err := q.Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLimiterWindow(t *testing.T) {
	db := limiterStore(t)
	now := time.Unix(1_000_000, 0)
	l := newLimiter(10, 15*time.Minute, 100)
	l.now = func() time.Time { return now }
	blocked := func(key string) (time.Duration, bool) {
		t.Helper()
		wait, b, err := l.blocked(db, key)
		if err != nil {
			t.Fatal(err)
		}
		return wait, b
	}
	fail := func(key string) {
		t.Helper()
		if err := l.fail(db, key); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 9; i++ {
		fail("1.2.3.4")
		now = now.Add(time.Minute)
	}
	if _, b := blocked("1.2.3.4"); b {
		t.Fatal("blocked after 9 failures")
	}
	fail("1.2.3.4") // 10th, at +9 min; the first was at +0
	wait, b := blocked("1.2.3.4")
	if !b || wait != 6*time.Minute {
		t.Fatalf("blocked=%v wait=%v, want 6m", b, wait)
	}
	if _, b := blocked("1.2.3.5"); b {
		t.Fatal("another address is blocked")
	}
	// A client keeps at most its last 10 failures.
	fail("1.2.3.4")
	if n := failures(t, db, "1.2.3.4"); n != 10 {
		t.Fatalf("%d rows kept for one client, want 10", n)
	}
	now = now.Add(7 * time.Minute) // the first two failures leave the window
	if _, b := blocked("1.2.3.4"); b {
		t.Fatal("still blocked after the window passed")
	}
	now = now.Add(time.Hour)
	fail("5.6.7.8")
	if _, b := blocked("1.2.3.4"); b || failures(t, db, "") != 1 {
		t.Fatalf("old rows kept: %d", failures(t, db, ""))
	}
}

// The table is bounded: beyond its capacity the oldest failures go, and a
// client that keeps failing stays blocked.
func TestLimiterBound(t *testing.T) {
	db := limiterStore(t)
	now := time.Unix(1_000_000, 0)
	l := newLimiter(10, 15*time.Minute, 50)
	l.now = func() time.Time { return now }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.fail(db, "victim"))
	for i := 0; i < 300; i++ {
		now = now.Add(time.Millisecond)
		must(l.fail(db, fmt.Sprintf("10.0.%d.%d", i>>8&255, i&255)))
		if n := failures(t, db, ""); n > 50 {
			t.Fatalf("%d rows, cap 50", n)
		}
	}
	if failures(t, db, "victim") != 0 {
		t.Fatal("the oldest failure was not evicted")
	}
	for i := 0; i < 10; i++ {
		must(l.fail(db, "attacker"))
	}
	if _, b, err := l.blocked(db, "attacker"); err != nil || !b {
		t.Fatalf("attacker not blocked: %v", err)
	}
}

func TestLimitKeyAndClientIP(t *testing.T) {
	limitKey := func(ip string) string { return clientid.Key(ip, clientid.DefaultIPv6Prefix) }
	if limitKey("2001:db8:1:2:3:4:5:6") != limitKey("2001:db8:1:2:ffff::1") || limitKey("2001:db8:1:2::1") == limitKey("2001:db8:1:3::1") {
		t.Fatal("IPv6 not keyed by /64")
	}
	if limitKey("::ffff:10.0.0.1") != "10.0.0.1" || limitKey("10.0.0.1") == limitKey("10.0.0.2") {
		t.Fatal("IPv4 keys")
	}
	r := httptest.NewRequest("POST", "/api/v1/auth/login", nil)
	r.RemoteAddr = "127.0.0.1:5555"
	r.Header.Set("X-Forwarded-For", "198.51.100.9, 203.0.113.1")
	if ip := clientIP(r, nil); ip != "127.0.0.1" {
		t.Fatalf("untrusted peer: X-Forwarded-For used (%s)", ip)
	}
	if ip := clientIP(r, []string{"127.0.0.0/8"}); ip != "203.0.113.1" {
		t.Fatalf("trusted peer: %s", ip)
	}
	if ip := clientIP(r, []string{"127.0.0.1", "203.0.113.0/24"}); ip != "198.51.100.9" {
		t.Fatalf("chain of trusted proxies: %s", ip)
	}
}

func TestPasswordHash(t *testing.T) {
	h, err := hashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") || strings.Contains(h, "correct horse") {
		t.Fatalf("hash %q", h)
	}
	h2, _ := hashPassword("correct horse battery")
	if h == h2 {
		t.Fatal("no salt")
	}
	if !checkPassword(h, "correct horse battery") || checkPassword(h, "correct horse batterz") || checkPassword(h, "") {
		t.Fatal("checkPassword")
	}
	for _, bad := range []string{"", "plain", "$argon2id$v=19$m=999999999,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "$2a$10$abcdefghijklmnopqrstuv"} {
		if checkPassword(bad, "plain") {
			t.Fatalf("malformed hash %q matched", bad)
		}
	}
}

func TestTokenComparison(t *testing.T) {
	tok := strings.Repeat("ab", 32)
	stored := sha256Hex(tok)
	if !tokenMatches(tok, stored) {
		t.Fatal("the token does not match its hash")
	}
	for _, bad := range []string{"", strings.Repeat("ab", 31) + "ac", strings.ToUpper(tok), stored} {
		if tokenMatches(bad, stored) {
			t.Fatalf("%q matched", bad)
		}
	}
	if tokenMatches(tok, "not-hex") || tokenMatches(tok, "") {
		t.Fatal("a malformed stored hash matched")
	}
}

func TestPresentedToken(t *testing.T) {
	events := &api.Endpoint{Path: eventsPath}
	other := &api.Endpoint{Path: "/api/v1/services"}
	r := httptest.NewRequest("GET", "/api/v1/events?access_token=abc", nil)
	if tok, ok := presentedToken(r, events); !ok || tok != "abc" {
		t.Fatal("access_token not accepted on the event stream")
	}
	r = httptest.NewRequest("GET", "/api/v1/services?access_token=abc", nil)
	if _, ok := presentedToken(r, other); ok {
		t.Fatal("access_token accepted outside the event stream")
	}
	r.Header.Set("Authorization", "bearer xyz")
	if tok, _ := presentedToken(r, other); tok != "xyz" {
		t.Fatal("Bearer scheme is case-insensitive")
	}
	r = httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Admin-Token", "t1")
	if tok, _ := presentedToken(r, other); tok != "t1" {
		t.Fatal("X-Admin-Token")
	}
	r.Header.Set("Authorization", "Basic Zm9vOmJhcg==")
	if tok, _ := presentedToken(r, other); tok != "t1" {
		t.Fatal("a Basic Authorization header hides X-Admin-Token")
	}
}

func TestEmailValidation(t *testing.T) {
	for _, ok := range []string{"a@example.com", "A.B+c@sub.example.org", "x@localhost"} {
		if validEmail(ok) != nil {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "a", "a@", "@b.com", "a b@c.com", "<a@b.com>", "A <a@b.com>", " a@b.com", "a@b.com "} {
		if validEmail(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
