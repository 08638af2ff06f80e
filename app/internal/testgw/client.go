package testgw

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/caddy-gateway/gateway/internal/reqtest"
)

// Answer is one answer of the gateway's proxy listener.
type Answer struct {
	Status int
	Header http.Header
	Body   string
}

// Proxy sends a request to the gateway's HTTP proxy listener and reads the
// whole answer (failures end t); hdr holds header name, value pairs, a "Host" pair setting
// the request's host. The answer is the gateway's own: without an
// Accept-Encoding pair the request asks for identity (no transparent gzip:
// compression tests look at the raw answer), and redirects are not followed.
func (g *Gateway) Proxy(t testing.TB, method, path string, body io.Reader, hdr ...string) Answer {
	t.Helper()
	req := reqtest.New(t, method, g.ProxyURL+path, body, hdr...)
	if req.Header.Get("Accept-Encoding") == "" {
		req.Header.Set("Accept-Encoding", "identity")
	}
	client := *g.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("proxy %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
}

// Login signs a user in with a password and returns the header that
// carries the session cookie.
func (g *Gateway) Login(email, password string) http.Header {
	g.T.Helper()
	body, _ := json.Marshal(map[string]string{"email": email, "password": password})
	resp, err := http.Post(g.AdminURL+"/api/v1/auth/login", "application/json", bytes.NewReader(body))
	if err != nil {
		g.T.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.Cookies()) == 0 {
		g.T.Fatalf("login %s: %d", email, resp.StatusCode)
	}
	h := http.Header{}
	for _, c := range resp.Cookies() {
		h.Add("Cookie", c.Name+"="+c.Value)
	}
	return h
}
