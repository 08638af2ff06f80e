package guard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer admin.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(admin.URL, "http://"))
	Set("the test admin", "127.0.0.1:"+port)
	Set("the wildcard admin", ":1")
	Set("caddy admin", "unix//run/caddy/admin.sock")
	defer Set("the test admin")
	defer Set("the wildcard admin")
	defer Set("caddy admin")

	n := atoi(port)
	for _, hp := range [][2]any{{"127.0.0.1", n}, {"localhost", n}, {"::ffff:127.0.0.1", n}, {"0.0.0.0", n}, {"127.0.0.1", 1}, {"::1", 1}, {"0.0.0.0", 1}} {
		if err := CheckHostPort(hp[0].(string), hp[1].(int)); err == nil {
			t.Errorf("CheckHostPort(%v, %v) accepted", hp[0], hp[1])
		}
	}
	for _, hp := range [][2]any{{"127.0.0.1", n + 1}, {"example.com", n}, {"10.255.255.1", n}} {
		if err := CheckHostPort(hp[0].(string), hp[1].(int)); err != nil {
			t.Errorf("CheckHostPort(%v, %v): %v", hp[0], hp[1], err)
		}
	}

	// At dial time, by the resolved peer: localhost dodges nothing.
	d := Dialer(&net.Dialer{})
	for _, a := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		if c, err := d.DialContext(context.Background(), "tcp", a); !errors.Is(err, ErrForbidden) {
			if c != nil {
				c.Close()
			}
			t.Errorf("dial %s: %v", a, err)
		}
	}
	if c, err := d.DialContext(context.Background(), "tcp", strings.TrimPrefix(other.URL, "http://")); err != nil {
		t.Errorf("dial other: %v", err)
	} else {
		c.Close()
	}
	wrapped := WrapDial((&net.Dialer{}).DialContext)
	if _, err := wrapped(context.Background(), "tcp", "localhost:"+port); !errors.Is(err, ErrForbidden) {
		t.Errorf("wrapped dial: %v", err)
	}
	if err := Control("unix", "/run/caddy/admin.sock", nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("unix socket: %v", err)
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestReaches(t *testing.T) {
	for _, c := range []struct {
		listen, peer string
		want         bool
	}{
		{"127.0.0.1:9000", "127.0.0.1:9000", true},
		{"127.0.0.1:9000", "0.0.0.0:9000", true},
		{"127.0.0.1:9000", "127.0.0.1:9001", false},
		{"127.0.0.1:9000", "127.0.0.2:9000", false},
		{"[::]:9000", "127.0.0.1:9000", true},
		{":9000", "[::1]:9000", true},
		{"0.0.0.0:9000", "[::ffff:127.0.0.1]:9000", true},
		{"0.0.0.0:9000", "192.0.2.1:9000", false},
		{"127.0.0.1:9000", "not an address", false},
	} {
		if got := Reaches(c.listen, c.peer); got != c.want {
			t.Errorf("Reaches(%q, %q) = %v", c.listen, c.peer, got)
		}
	}
}
