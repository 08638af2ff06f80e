package tcptest

import (
	"io"
	"net"
	"testing"
)

func TestServe(t *testing.T) {
	addr := Serve(t, func(c net.Conn) {
		defer c.Close()
		_, _ = io.WriteString(c, "hello")
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b, err := io.ReadAll(c); err != nil || string(b) != "hello" {
		t.Fatalf("%q %v", b, err)
	}
}
