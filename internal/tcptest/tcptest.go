// Package tcptest runs plain TCP servers on 127.0.0.1 for tests (targets
// that accept, count, drain or hold connections). Its test is
// tcptest_test.go.
package tcptest

import (
	"net"
	"testing"
)

// Serve runs a TCP server on 127.0.0.1 that hands every connection to
// serve, each in its own goroutine, until the test ends; it returns the
// server's address.
func Serve(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}
