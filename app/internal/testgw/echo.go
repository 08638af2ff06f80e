package testgw

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// Upstream runs an HTTP server on 127.0.0.1 that answers with h; it stops
// when the test ends.
func Upstream(t testing.TB, h http.HandlerFunc) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// Echo runs an upstream on 127.0.0.1 that answers what it received as JSON
// (Echoed), tagged with name; it stops when the test ends.
func Echo(t testing.TB, name string) *httptest.Server {
	return Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Echoed{Name: name, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host,
			Method: r.Method, Headers: r.Header, Body: string(body)})
	})
}

// Echoed is what an Echo upstream received.
type Echoed struct {
	Name    string      `json:"name"`
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Host    string      `json:"host"`
	Method  string      `json:"method"`
	Headers http.Header `json:"headers"`
	Body    string      `json:"body"`
}

// DecodeEcho reads an Echo upstream's answer (failing t when body is not
// one).
func DecodeEcho(t testing.TB, body string) Echoed {
	t.Helper()
	var e Echoed
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an echo answer: %q", body)
	}
	return e
}

// Addr is a test server's host:port, as a target takes it.
func Addr(s *httptest.Server) string { return s.Listener.Addr().String() }

// Port is a test server's port.
func Port(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }

// HostPort splits a host:port address into a target's host and port.
func HostPort(t testing.TB, addr string) (host string, port int) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if port, err = strconv.Atoi(p); err != nil {
		t.Fatal(err)
	}
	return host, port
}
