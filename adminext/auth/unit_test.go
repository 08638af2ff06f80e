package auth

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/adminext/api"
)

func TestLimiterWindow(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newLimiter(10, 15*time.Minute, 100)
	l.now = func() time.Time { return now }
	for i := 0; i < 9; i++ {
		l.fail("1.2.3.4")
		now = now.Add(time.Minute)
	}
	if _, b := l.blocked("1.2.3.4"); b {
		t.Fatal("blocked after 9 failures")
	}
	l.fail("1.2.3.4") // 10th, at +9 min; the first was at +0
	wait, b := l.blocked("1.2.3.4")
	if !b || wait != 6*time.Minute {
		t.Fatalf("blocked=%v wait=%v, want 6m", b, wait)
	}
	if _, b := l.blocked("1.2.3.5"); b {
		t.Fatal("another address is blocked")
	}
	now = now.Add(6 * time.Minute) // the first failure leaves the window
	if _, b := l.blocked("1.2.3.4"); b {
		t.Fatal("still blocked after the window passed")
	}
	now = now.Add(time.Hour)
	if _, b := l.blocked("1.2.3.4"); b || l.size() != 0 {
		t.Fatalf("old entries kept: %d", l.size())
	}
}

func TestLimiterMemoryBound(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newLimiter(10, 15*time.Minute, 1000)
	l.now = func() time.Time { return now }
	l.fail("victim")
	for i := 0; i < 50_000; i++ {
		l.fail(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		if l.size() > 1000 {
			t.Fatalf("%d entries, cap 1000", l.size())
		}
	}
	// The oldest entries were evicted first.
	if _, ok := l.entries["victim"]; ok {
		t.Fatal("the oldest entry was not evicted")
	}
	// A blocked client stays blocked while it keeps failing recently.
	for i := 0; i < 10; i++ {
		l.fail("attacker")
	}
	if _, b := l.blocked("attacker"); !b {
		t.Fatal("attacker not blocked")
	}
	// Expired entries go away as time passes.
	now = now.Add(16 * time.Minute)
	l.fail("new")
	if l.size() != 1 {
		t.Fatalf("%d entries after the window, want 1", l.size())
	}
}

func TestLimitKeyAndClientIP(t *testing.T) {
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
