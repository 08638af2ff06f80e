package testgw

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/caddy-gateway/gateway/internal/tcptest"
	"net"
	"strings"
	"testing"
	"time"
)

// WantError sends an admin request that must answer status with an
// {error} body containing every fragment.
func (g *Gateway) WantError(status int, method, path string, body any, fragments ...string) {
	g.T.Helper()
	st, b := g.Do(method, path, body)
	if st != status {
		g.T.Fatalf("%s %s %v: status %d, want %d: %s", method, path, body, st, status, b)
	}
	var e struct{ Error string }
	if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
		g.T.Fatalf("%s %s: not an error body: %s", method, path, b)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Error, f) {
			g.T.Fatalf("%s %s %v: error %q does not contain %q", method, path, body, e.Error, f)
		}
	}
}

// WantGet sends a proxied GET (host optional) that must answer status
// with a body containing every fragment, and returns the body.
func (g *Gateway) WantGet(host, path string, status int, fragments ...string) string {
	g.T.Helper()
	st, body, _ := g.Get(host, path)
	if st != status {
		g.T.Fatalf("proxy GET %s%s: status %d, want %d: %s", host, path, st, status, body)
	}
	for _, f := range fragments {
		if !strings.Contains(body, f) {
			g.T.Fatalf("proxy GET %s%s: body %q does not contain %q", host, path, body, f)
		}
	}
	return body
}

// TCPEcho runs a TCP upstream on 127.0.0.1 that answers each line with
// name + ": " + line, and returns its address.
func TCPEcho(t testing.TB, name string) string {
	t.Helper()
	return tcptest.Serve(t, func(c net.Conn) {
		defer c.Close()
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			fmt.Fprintf(c, "%s: %s\n", name, sc.Text())
		}
	})
}

// TCPSay sends one line to addr and returns the first line of the answer.
func TCPSay(addr, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "%s\n", line)
	got, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(got), err
}
