package auth_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/storage"
)

// env is one running gateway and every answer its clients received (for
// the scans for secrets).
type env struct {
	t *testing.T
	g *testgw.Gateway

	mu      sync.Mutex
	answers []string // bodies (and headers other than Set-Cookie)
}

func start(t *testing.T) *env {
	t.Helper()
	return &env{t: t, g: testgw.Start(t, nil)}
}

func (e *env) record(s string) {
	e.mu.Lock()
	e.answers = append(e.answers, s)
	e.mu.Unlock()
}

// noSecret fails when any recorded answer contains one of secrets, except
// the answers allowed (e.g. the one that created a token).
func (e *env) noSecret(secrets ...string) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, a := range e.answers {
			if strings.Contains(a, s) {
				e.t.Errorf("a secret (%.6s…) appears in an answer: %.300s", s, a)
			}
		}
	}
}

// client is a caller of the admin API: a cookie jar (a browser) or a
// token, never following redirects.
type client struct {
	e      *env
	hc     *http.Client
	header http.Header
}

func (e *env) browser() *client {
	jar, _ := cookiejar.New(nil)
	return &client{e: e, header: http.Header{}, hc: &http.Client{
		Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (e *env) anon() *client { return e.browser() }

func (e *env) withToken(tok string) *client {
	c := e.browser()
	c.header.Set("Authorization", "Bearer "+tok)
	return c
}

type answer struct {
	Status int
	Body   []byte
	Header http.Header
}

func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", a.Body, err)
	}
}

func (a answer) m(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	a.decode(t, &v)
	return v
}

func (a answer) errText(t testing.TB) string {
	t.Helper()
	var v struct{ Error string }
	if err := json.Unmarshal(a.Body, &v); err != nil || v.Error == "" {
		t.Fatalf("not an error body: %s", a.Body)
	}
	return v.Error
}

// do sends a request. body: nil, a string/[]byte sent as is, or a value sent
// as JSON. hdr: name, value pairs ("Content-Type", "" removes the JSON
// default). Admin answers other than redirects are checked against the
// served OpenAPI document.
func (c *client) do(method, url string, body any, hdr ...string) answer {
	t := c.e.t
	t.Helper()
	if strings.HasPrefix(url, "/") {
		url = c.e.g.AdminURL + url
	}
	req, raw := testgw.NewAdminRequest(t, method, url, body)
	for k, v := range c.header {
		req.Header[k] = v
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	h := resp.Header.Clone()
	h.Del("Set-Cookie")
	hb, _ := json.Marshal(h)
	c.e.record(string(out) + "\n" + string(hb))
	if strings.HasPrefix(url, c.e.g.AdminURL) && c.e.g.OpenAPI != nil && (resp.StatusCode < 300 || resp.StatusCode >= 400) {
		req.Body = io.NopCloser(bytes.NewReader(raw))
		c.e.g.OpenAPI.Check(t, req, resp, out)
	}
	return answer{resp.StatusCode, out, resp.Header}
}

func (c *client) want(status int, method, url string, body any, hdr ...string) answer {
	c.e.t.Helper()
	a := c.do(method, url, body, hdr...)
	if a.Status != status {
		c.e.t.Fatalf("%s %s: status %d, want %d: %s", method, url, a.Status, status, a.Body)
	}
	return a
}

// cookie is the value of the jar's cookie name for the admin URL.
func (c *client) cookie(name string) string {
	req, _ := http.NewRequest("GET", c.e.g.AdminURL+"/", nil)
	for _, ck := range c.hc.Jar.Cookies(req.URL) {
		if ck.Name == name {
			return ck.Value
		}
	}
	return ""
}

func (c *client) setCookie(name, value string) {
	req, _ := http.NewRequest("GET", c.e.g.AdminURL+"/", nil)
	c.hc.Jar.SetCookies(req.URL, []*http.Cookie{{Name: name, Value: value, Path: "/"}})
}

// token creates (or rotates) the admin token.
func (c *client) token() string {
	c.e.t.Helper()
	a := c.want(200, "POST", "/api/v1/admin/token", nil, "Content-Type", "application/json")
	var tok struct{ Token, Note string }
	a.decode(c.e.t, &tok)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tok.Token) || tok.Note == "" {
		c.e.t.Fatalf("bad token answer: %s", a.Body)
	}
	return tok.Token
}

// user creates a user with the client's credentials.
func (c *client) user(email, role, password string) int64 {
	c.e.t.Helper()
	in := map[string]any{"email": email, "role": role}
	if password != "" {
		in["password"] = password
	}
	a := c.want(200, "POST", "/api/v1/users", in)
	return int64(a.m(c.e.t)["id"].(float64))
}

// login signs the browser in.
func (c *client) login(email, password string) answer {
	c.e.t.Helper()
	return c.want(200, "POST", "/api/v1/auth/login", map[string]string{"email": email, "password": password})
}

func (e *env) status() map[string]any {
	e.t.Helper()
	return e.anon().want(200, "GET", "/api/v1/admin/status", nil).m(e.t)
}

// db opens a second handle on the gateway's SQLite store (to age sessions).
func (e *env) db() *storage.Store {
	e.t.Helper()
	if !strings.HasSuffix(e.g.DSN, ".db") {
		e.t.Fatalf("unexpected DSN %s", e.g.DSN)
	}
	s, err := storage.Open("sqlite", filepath.Clean(e.g.DSN))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

func setCookieOf(a answer, name string) *http.Cookie {
	for _, ck := range (&http.Response{Header: a.Header}).Cookies() {
		if ck.Name == name {
			return ck
		}
	}
	return nil
}

func sub(t *testing.T, name string, f func(t *testing.T, e *env)) {
	t.Run(name, func(t *testing.T) { f(t, start(t)) })
}
