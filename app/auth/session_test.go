package auth_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/storage"
)

func TestSessions(t *testing.T) {
	e := start(t)
	tok := e.anon().token()
	adm := e.withToken(tok)
	adm.user("alice@example.com", "admin", "alice-password")

	b := e.browser()
	a := b.login("Alice@Example.com", "alice-password")
	p := a.m(t)
	user, _ := p["user"].(map[string]any)
	if p["method"] != "session" || p["role"] != "admin" || user["email"] != "alice@example.com" || user["has_password"] != true {
		t.Fatalf("principal: %v", p)
	}
	ck := setCookieOf(a, "gateway_session")
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.MaxAge != 7*24*3600 || ck.Secure {
		t.Fatalf("session cookie: %+v", ck)
	}
	if len(ck.Value) < 43 {
		t.Fatalf("session token too short: %d", len(ck.Value))
	}
	first := ck.Value

	// Session fixation: every login gets a new session id, and the one
	// sent along stops working.
	b.login("alice@example.com", "alice-password")
	second := b.cookie("gateway_session")
	if second == "" || second == first {
		t.Fatal("login kept the session id")
	}
	old := e.anon()
	old.setCookie("gateway_session", first)
	old.want(401, "GET", "/api/v1/auth/me", nil)
	// A planted cookie value is never adopted.
	planted := e.anon()
	planted.setCookie("gateway_session", "attacker-chosen-value")
	planted.login("alice@example.com", "alice-password")
	if v := planted.cookie("gateway_session"); v == "attacker-chosen-value" || v == "" {
		t.Fatal("planted session id adopted")
	}

	// Cookie tossing: a page on this host name (any port: an upstream
	// behind the proxy) sets a gateway_session of its own with a longer
	// Path, which the browser sends before the real one. Two are never
	// trusted, whichever comes first.
	for _, cookie := range []string{
		"gateway_session=attacker-session; gateway_session=" + second,
		"gateway_session=" + second + "; gateway_session=attacker-session",
	} {
		if msg := e.anon().want(401, "GET", "/api/v1/auth/me", nil, "Cookie", cookie).errText(t); !strings.Contains(msg, "more than one gateway_session") {
			t.Fatalf("two session cookies: %q", msg)
		}
	}
	e.anon().want(200, "GET", "/api/v1/auth/me", nil, "Cookie", "gateway_session="+second)

	// Server-side only the hash is stored.
	db := e.db()
	var rows []storage.AdminSession
	if err := db.DB.Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.TokenHash == second || len(r.TokenHash) != 64 {
			t.Fatalf("session row stores %q", r.TokenHash)
		}
	}

	// me / logout.
	b.want(200, "GET", "/api/v1/auth/me", nil)
	out := b.want(200, "POST", "/api/v1/auth/logout", nil, "Content-Type", "application/json")
	if out.m(t)["signed_out"] != true {
		t.Fatalf("logout: %s", out.Body)
	}
	if c := setCookieOf(out, "gateway_session"); c == nil || c.MaxAge >= 0 || c.Value != "" {
		t.Fatalf("logout did not clear the cookie: %+v", c)
	}
	reuse := e.anon()
	reuse.setCookie("gateway_session", second)
	reuse.want(401, "GET", "/api/v1/auth/me", nil)
	b.want(401, "GET", "/api/v1/auth/me", nil)

	// Wrong password, unknown account, bad input.
	e.anon().want(401, "POST", "/api/v1/auth/login", map[string]string{"email": "alice@example.com", "password": "wrong-password"})
	e.anon().want(401, "POST", "/api/v1/auth/login", map[string]string{"email": "nobody@example.com", "password": "alice-password"})
	e.anon().want(400, "POST", "/api/v1/auth/login", map[string]string{"email": "alice@example.com"})
	e.anon().want(400, "POST", "/api/v1/auth/login", `{"email":"alice@example.com","password":"alice-password"`)

	// Expired sessions are refused and deleted.
	b.login("alice@example.com", "alice-password")
	if err := db.DB.Model(&storage.AdminSession{}).Where("1 = 1").Update("expires_at", time.Now().Add(-time.Minute)).Error; err != nil {
		t.Fatal(err)
	}
	b.want(401, "GET", "/api/v1/auth/me", nil)
	var n int64
	b.login("alice@example.com", "alice-password") // purges all expired ones
	db.DB.Model(&storage.AdminSession{}).Where("expires_at <= ?", time.Now()).Count(&n)
	if n != 0 {
		t.Fatalf("%d expired sessions left after a login", n)
	}

	// Secure cookie when public_url is https.
	settings := adm.want(200, "GET", "/api/v1/settings", nil).m(t)
	delete(settings, "updated_at")
	settings["public_url"] = "https://gateway.example.com"
	adm.want(200, "PUT", "/api/v1/settings", settings)
	if ck := setCookieOf(e.anon().login("alice@example.com", "alice-password"), "gateway_session"); ck == nil || !ck.Secure {
		t.Fatalf("cookie not Secure with an https public_url: %+v", ck)
	}
}

func TestPasswordChange(t *testing.T) {
	e := start(t)
	tok := e.anon().token()
	adm := e.withToken(tok)
	adm.user("bob@example.com", "viewer", "bob-password")
	b, other := e.browser(), e.browser()
	b.login("bob@example.com", "bob-password")
	other.login("bob@example.com", "bob-password")

	// Only a session has a password to change.
	adm.want(400, "PUT", "/api/v1/auth/me/password", map[string]any{"new_password": "whatever-1"})
	e.anon().want(401, "PUT", "/api/v1/auth/me/password", map[string]any{"new_password": "whatever-1"})
	b.want(400, "PUT", "/api/v1/auth/me/password", map[string]any{"new_password": "new-bob-password"})
	b.want(400, "PUT", "/api/v1/auth/me/password", map[string]any{"current_password": "wrong-password", "new_password": "new-bob-password"})
	b.want(400, "PUT", "/api/v1/auth/me/password", map[string]any{"current_password": "bob-password", "new_password": "short"})
	r := b.want(200, "PUT", "/api/v1/auth/me/password", map[string]any{"current_password": "bob-password", "new_password": "new-bob-password"})
	if r.m(t)["updated"] != true {
		t.Fatalf("answer: %s", r.Body)
	}
	// The current session stays, the others end.
	b.want(200, "GET", "/api/v1/auth/me", nil)
	other.want(401, "GET", "/api/v1/auth/me", nil)
	e.anon().want(401, "POST", "/api/v1/auth/login", map[string]string{"email": "bob@example.com", "password": "bob-password"})
	e.anon().login("bob@example.com", "new-bob-password")
	e.noSecret("bob-password", "new-bob-password", "$argon2id$")
}

// CSRF: cross-origin browser requests with unsafe methods are refused
// (net/http.CrossOriginProtection: Sec-Fetch-Site, else Origin against the
// Host), whatever their credentials; same-origin browser requests and
// clients without those headers pass with any Content-Type, cookie or not.
func TestCSRF(t *testing.T) {
	e := start(t)
	tok := e.anon().token()
	adm := e.withToken(tok)
	adm.user("carol@example.com", "admin", "carol-password")
	newViewer := func() string {
		return itoa(adm.want(200, "POST", "/api/v1/users", map[string]any{"email": "v@example.com", "role": "viewer", "password": "password-1"}).m(t)["id"])
	}
	vid := newViewer()
	s := e.browser()
	s.login("carol@example.com", "carol-password")
	host := strings.TrimPrefix(e.g.AdminURL, "http://")

	body := `{"name":"svc"}`
	// Refused: cross-origin browser requests, with the cookie (or a token).
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "http://evil.example"},
		{"Origin", "null"},
		{"Origin", "http://evil.example", "Sec-Fetch-Site", ""},
		{"Sec-Fetch-Site", "cross-site", "Origin", "http://" + host},
	} {
		for _, req := range []struct{ method, path string }{
			{"POST", "/api/v1/services"}, {"DELETE", "/api/v1/users/" + vid}, {"POST", "/api/v1/auth/logout"},
			{"POST", "/api/v1/admin/token"}, {"PUT", "/api/v1/auth/me/password"},
		} {
			a := s.want(403, req.method, req.path, body, append([]string{"Content-Type", ""}, h...)...)
			if !strings.Contains(a.errText(t), "cross-origin") {
				t.Fatalf("403 message: %s", a.Body)
			}
		}
		adm.want(403, "POST", "/api/v1/services", body, h...)
		e.anon().want(403, "POST", "/api/v1/auth/login", `{"email":"carol@example.com","password":"carol-password"}`, h...)
		s.want(200, "GET", "/api/v1/services", nil, h...) // safe methods pass
	}
	// Allowed: same-origin browser requests and non-browser clients, with
	// any Content-Type (or none).
	for _, h := range [][]string{
		{},
		{"Sec-Fetch-Site", "same-origin"},
		{"Sec-Fetch-Site", "none"},
		{"Origin", "http://" + host},
		{"Sec-Fetch-Site", "same-origin", "Origin", "http://" + host},
	} {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/json"} {
			hdr := append([]string{"Content-Type", ct}, h...)
			s.want(200, "POST", "/api/v1/services", body, hdr...)
		}
		s.want(200, "DELETE", "/api/v1/users/"+vid, nil, append([]string{"Content-Type", ""}, h...)...)
		vid = newViewer()
	}
	s.want(200, "POST", "/api/v1/admin/token", nil, "Content-Type", "")
	// The settings' public_url origin is trusted (a proxy in front of the
	// admin API changes Host).
	settings := s.want(200, "GET", "/api/v1/settings", nil).m(t)
	delete(settings, "updated_at")
	settings["public_url"] = "https://admin.example.com/ui"
	s.want(200, "PUT", "/api/v1/settings", settings)
	s.want(200, "POST", "/api/v1/services", body, "Origin", "https://admin.example.com", "Sec-Fetch-Site", "cross-site")
	s.want(403, "POST", "/api/v1/services", body, "Origin", "http://admin.example.com", "Sec-Fetch-Site", "cross-site")
	s.want(403, "POST", "/api/v1/services", body, "Origin", "https://admin.example.com.evil", "Sec-Fetch-Site", "cross-site")
	out := s.want(200, "POST", "/api/v1/auth/logout", nil, "Content-Type", "")
	if out.m(t)["signed_out"] != true {
		t.Fatalf("logout: %s", out.Body)
	}
	s.want(401, "GET", "/api/v1/auth/me", nil)
	// Login CSRF: a text/plain login is still refused by the login itself.
	e.anon().want(400, "POST", "/api/v1/auth/login", `{"email":"carol@example.com","password":"carol-password"}`, "Content-Type", "text/plain")
	// The rule is in the OpenAPI document.
	resp, err := http.Get(e.g.AdminURL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(doc), "CSRF rule") {
		t.Fatal("the CSRF rule is not documented in the OpenAPI document")
	}
}

func TestLoginLimit(t *testing.T) {
	e := start(t)
	e.anon().user("dave@example.com", "admin", "dave-password")
	adm := e.browser()
	adm.login("dave@example.com", "dave-password")
	settings := adm.want(200, "GET", "/api/v1/settings", nil).m(t)
	delete(settings, "updated_at")
	settings["trusted_proxies"] = []string{"127.0.0.1"}
	adm.want(200, "PUT", "/api/v1/settings", settings)
	c := e.browser()
	bad := map[string]string{"email": "dave@example.com", "password": "wrong-password"}
	for i := 0; i < 10; i++ {
		c.want(401, "POST", "/api/v1/auth/login", bad)
	}
	for _, body := range []map[string]string{bad, {"email": "dave@example.com", "password": "dave-password"}} {
		a := c.want(429, "POST", "/api/v1/auth/login", body)
		ra, err := strconv.Atoi(a.Header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 15*60 {
			t.Fatalf("Retry-After %q", a.Header.Get("Retry-After"))
		}
	}

	// Per client IP: behind a trusted proxy, X-Forwarded-For decides.
	for i := 0; i < 10; i++ {
		c.want(401, "POST", "/api/v1/auth/login", bad, "X-Forwarded-For", "203.0.113.7")
	}
	c.want(429, "POST", "/api/v1/auth/login", bad, "X-Forwarded-For", "203.0.113.7")
	c.want(429, "POST", "/api/v1/auth/login", bad, "X-Forwarded-For", "198.51.100.1, 203.0.113.7")
	c.want(200, "POST", "/api/v1/auth/login", map[string]string{"email": "dave@example.com", "password": "dave-password"}, "X-Forwarded-For", "203.0.113.8")
	// IPv6 clients count per /64.
	for i := 0; i < 10; i++ {
		c.want(401, "POST", "/api/v1/auth/login", bad, "X-Forwarded-For", fmt.Sprintf("2001:db8:1:2::%x", i+1))
	}
	c.want(429, "POST", "/api/v1/auth/login", bad, "X-Forwarded-For", "2001:db8:1:2:ffff::1")
	c.want(401, "POST", "/api/v1/auth/login", bad, "X-Forwarded-For", "2001:db8:1:3::1")
	// An IPv4-mapped spelling is the IPv4 client (package clientid, as the
	// rate-limit plugin counts).
	for i := 0; i < 10; i++ {
		c.want(401, "POST", "/api/v1/auth/login", bad, "X-Forwarded-For", []string{"198.51.100.20", "::ffff:198.51.100.20"}[i%2])
	}
	c.want(429, "POST", "/api/v1/auth/login", bad, "X-Forwarded-For", "::ffff:198.51.100.20")
	c.want(429, "POST", "/api/v1/auth/login", bad, "X-Forwarded-For", "198.51.100.20")
}

// TestConcurrentLoginsLimit: guesses sent at once from one client cannot
// all pass the limit's check before a failure is recorded: of 30
// concurrent wrong passwords, 10 are checked (401) and the rest are 429.
func TestConcurrentLoginsLimit(t *testing.T) {
	e := start(t)
	e.anon().user("erin@example.com", "admin", "erin-password")
	bad := map[string]string{"email": "erin@example.com", "password": "wrong-password"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[int]int{}
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := e.browser().do("POST", "/api/v1/auth/login", bad)
			mu.Lock()
			got[a.Status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if got[401] != 10 || got[429] != 20 {
		t.Fatalf("30 concurrent wrong passwords answered %v; want 10 401 and 20 429", got)
	}
	e.browser().want(429, "POST", "/api/v1/auth/login", map[string]string{"email": "erin@example.com", "password": "erin-password"})
}

// TestPasswordChangeLimit: a wrong current_password is a failed login of
// the client: a stolen session cannot be used to guess the account's
// password past the failed-login limit (and a blocked client cannot try
// there either).
func TestPasswordChangeLimit(t *testing.T) {
	e := start(t)
	e.anon().user("erin@example.com", "admin", "erin-password")
	b := e.browser()
	b.login("erin@example.com", "erin-password")
	bad := map[string]any{"current_password": "wrong-password", "new_password": "new-erin-password"}
	for i := 0; i < 10; i++ {
		b.want(400, "PUT", "/api/v1/auth/me/password", bad)
	}
	for _, body := range []map[string]any{bad, {"current_password": "erin-password", "new_password": "new-erin-password"}} {
		// 400 naming the field: the specification lists 200, 400 and 401
		a := b.want(400, "PUT", "/api/v1/auth/me/password", body)
		if !strings.Contains(string(a.Body), "current_password: too many failed attempts") {
			t.Fatalf("blocked password change: %s", a.Body)
		}
		if ra, err := strconv.Atoi(a.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 15*60 {
			t.Fatalf("Retry-After %q", a.Header.Get("Retry-After"))
		}
	}
	// The same count as password sign-in.
	e.anon().want(429, "POST", "/api/v1/auth/login", map[string]string{"email": "erin@example.com", "password": "erin-password"})
	// The session itself still works.
	b.want(200, "GET", "/api/v1/auth/me", nil)
}
