package auth_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// rebound sends what a browser sends after DNS rebinding: a page of host
// (the attacker's name, now resolving to the admin listener) calling the
// API same-origin, so the CSRF check passes.
func rebound(t *testing.T, e *env, method, path, host, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.g.AdminURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	port := e.g.AdminURL[strings.LastIndex(e.g.AdminURL, ":"):]
	req.Header.Set("Origin", "http://"+host)
	if !strings.Contains(host, ":") {
		req.Header.Set("Origin", "http://"+host+port)
		req.Host = host + port
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOpenModeDNSRebinding: while the API is open, loopback is all that
// protects it, and DNS rebinding gets a web page past loopback: the
// page's requests are same-origin for the browser, but they name the
// page's host. Open mode answers only requests addressed to an IP
// address, localhost, or the origin of settings.public_url.
func TestOpenModeDNSRebinding(t *testing.T) {
	e := start(t)
	admin := `{"email":"mallory@evil.test","role":"admin","password":"mallory-password"}`
	for _, host := range []string{"rebind.evil.test", "REBIND.evil.test.", "gateway.example.com"} {
		if st, body := rebound(t, e, "POST", "/api/v1/users", host, admin); st != 403 || !strings.Contains(body, `"error"`) {
			t.Fatalf("open mode, Host %s: POST /api/v1/users answered %d %s, want 403", host, st, body)
		}
		if st, _ := rebound(t, e, "GET", "/api/v1/settings", host, ""); st != 403 {
			t.Fatalf("open mode, Host %s: GET /api/v1/settings answered %d, want 403", host, st)
		}
		if st, _ := rebound(t, e, "GET", "/api/v1/no-such-path", host, ""); st != 403 {
			t.Fatalf("open mode, Host %s: unknown path answered %d, want 403", host, st)
		}
	}
	// Nothing was created: the API is still open.
	if s := e.status(); s["auth_enabled"] != false {
		t.Fatalf("status after the rebinding attempts: %v", s)
	}
	// Public endpoints stay public.
	if st, _ := rebound(t, e, "GET", "/api/v1/admin/status", "rebind.evil.test", ""); st != 200 {
		t.Fatalf("admin/status answered %d", st)
	}
	// IP addresses and localhost are fine.
	for _, host := range []string{"127.0.0.1", "localhost", "LocalHost.", "app.localhost", "[::1]"} {
		if st, body := rebound(t, e, "GET", "/api/v1/settings", host, ""); st != 200 {
			t.Fatalf("open mode, Host %s: %d %s", host, st, body)
		}
	}
	// The dashboard's public name, once set, is fine too.
	settings := e.anon().want(200, "GET", "/api/v1/settings", nil).m(t)
	delete(settings, "updated_at")
	settings["public_url"] = "https://gateway.example.com"
	e.anon().want(200, "PUT", "/api/v1/settings", settings)
	if st, body := rebound(t, e, "GET", "/api/v1/settings", "gateway.example.com", ""); st != 200 {
		t.Fatalf("Host of public_url: %d %s", st, body)
	}
	if st, _ := rebound(t, e, "GET", "/api/v1/settings", "rebind.evil.test", ""); st != 403 {
		t.Fatalf("another name after public_url was set: %d", st)
	}
	// Once authentication is enabled, credentials protect the API (a
	// rebound page has neither the cookie, bound to the real host, nor the
	// token), and any name may reach it.
	tok := e.anon().token()
	if st, _ := rebound(t, e, "GET", "/api/v1/settings", "rebind.evil.test", ""); st != 401 {
		t.Fatalf("authentication enabled, no credentials: %d", st)
	}
	e.withToken(tok).want(200, "GET", "/api/v1/settings", nil)
}
