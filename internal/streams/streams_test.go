package streams

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/tcptest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// holdingUpstream accepts connections and keeps them open, with no
// goroutine or buffer of its own per connection; it returns its address.
func holdingUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// discardingUpstream reads every connection until the client's end, then
// closes it; it returns its address.
func discardingUpstream(t *testing.T) string {
	return tcptest.Serve(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c); c.Close() })
}

// startServer binds one route on 127.0.0.1 to target; it returns the
// server and the route's bound address.
func startServer(t *testing.T, r Route) (*Server, string) {
	t.Helper()
	s := NewServer(nil)
	r.ID, r.ServiceID, r.ListenAddr = 1, 1, "127.0.0.1:0"
	s.Apply([]Route{r}, nil)
	t.Cleanup(func() { s.Close(t.Context()) })
	return s, s.Bound()[r.ListenAddr]
}

func memInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// TestIdleConnectionCost: an idle stream connection (a client that
// connects and sends nothing, the cheapest thing to hold open) costs the
// gateway little memory, whatever its service's timeouts. With timeouts
// (the service defaults) each one held two 32 KiB copy buffers and three
// goroutines, about 78 KB: 100,000 of them, 7.8 GB.
func TestIdleConnectionCost(t *testing.T) {
	const n = 300
	for _, r := range []Route{
		{IdleTimeoutMS: 60000, WriteTimeoutMS: 60000}, // the service defaults
		{},
	} {
		s, addr := startServer(t, Route{Targets: []string{holdingUpstream(t)}, IdleTimeoutMS: r.IdleTimeoutMS, WriteTimeoutMS: r.WriteTimeoutMS})
		before := memInUse()
		var conns []net.Conn
		for range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		deadline := time.Now().Add(10 * time.Second)
		for s.Totals().Active < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // every relay started
		per := (int64(memInUse()) - int64(before)) / n
		t.Logf("timeouts %d/%d ms: %d bytes per idle connection", r.IdleTimeoutMS, r.WriteTimeoutMS, per)
		if per > 32<<10 {
			t.Errorf("timeouts %d/%d ms: an idle stream connection holds %d bytes", r.IdleTimeoutMS, r.WriteTimeoutMS, per)
		}
		for _, c := range conns {
			c.Close()
		}
	}
}

// TestHalfClose: a client that half-closes (sends its last bytes, then
// FIN) still gets everything the upstream sends after that, and the
// upstream sees the end of the client's data; with and without timeouts.
func TestHalfClose(t *testing.T) {
	const size = 4 << 20
	for _, r := range []Route{{IdleTimeoutMS: 5000, WriteTimeoutMS: 5000}, {}} {
		upstream, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer upstream.Close()
		got := make(chan string, 1)
		go func() {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			b, _ := io.ReadAll(c) // until the client's half-close
			got <- string(b)
			_, _ = c.Write(bytes.Repeat([]byte("x"), size))
		}()
		r.Targets = []string{upstream.Addr().String()}
		_, addr := startServer(t, r)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).CloseWrite()
		n, err := io.Copy(io.Discard, c)
		if err != nil || n != size {
			t.Fatalf("timeouts %d ms: after the half-close the client got %d bytes of %d: %v", r.IdleTimeoutMS, n, size, err)
		}
		if s := <-got; s != "ping" {
			t.Fatalf("the upstream got %q", s)
		}
	}
}

// TestReloadLeaksNoGoroutine: applying configurations (every reload does)
// while connections are open starts no goroutine, and once the
// connections end, the goroutines of the server are the listeners' again.
func TestReloadLeaksNoGoroutine(t *testing.T) {
	r := Route{Targets: []string{discardingUpstream(t)}, IdleTimeoutMS: 60000, WriteTimeoutMS: 60000}
	s, addr := startServer(t, r)
	base := runtime.NumGoroutine()
	var conns []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	waitFor(t, func() bool { return s.Totals().Active == 20 })
	open := settledGoroutines() // the upstream's own start a moment later
	r.ID, r.ServiceID, r.ListenAddr = 1, 1, "127.0.0.1:0"
	for range 100 {
		s.Apply([]Route{r}, nil)
	}
	if n := runtime.NumGoroutine(); n > open {
		t.Fatalf("100 reloads with 20 open connections: %d goroutines, %d before", n, open)
	}
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, func() bool { return s.Totals().Active == 0 && runtime.NumGoroutine() <= base })
}

// settledGoroutines is the number of goroutines once it stayed the same
// for 50 ms (at most a second).
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for i, still := 0, 0; i < 100 && still < 5; i++ {
		time.Sleep(10 * time.Millisecond)
		if m := runtime.NumGoroutine(); m == n {
			still++
		} else {
			n, still = m, 0
		}
	}
	return n
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s (%d goroutines)", runtime.NumGoroutine())
		}
	}
}

// TestConnectionLimit: past the process's bound on open stream
// connections, a new connection is closed at once (no goroutine, no
// upstream dial) and the log says so once; once one closes, a new one is
// served again. Without the bound a client could open connections until
// the process had no descriptor left for the HTTP proxy or the admin API.
func TestConnectionLimit(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	s := NewServer(nil)
	s.max.Store(3)
	s.Apply([]Route{{ID: 1, ServiceID: 1, ListenAddr: "127.0.0.1:0", Targets: []string{discardingUpstream(t)}, IdleTimeoutMS: 60000}}, zap.New(core))
	t.Cleanup(func() { s.Close(t.Context()) })
	addr := s.Bound()["127.0.0.1:0"]
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closed reports whether the gateway closed c within a second.
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	var open []net.Conn
	for range 3 {
		open = append(open, dial())
	}
	waitFor(t, func() bool { return s.Totals().Active == 3 })
	for i := range 5 {
		if c := dial(); !closed(c) {
			t.Fatalf("connection %d past the limit of 3 stayed open", i+1)
		}
	}
	if got := logs.FilterMessage("stream connection limit reached: new connections are closed").All(); len(got) != 1 || got[0].ContextMap()["limit"] != int64(3) {
		t.Fatalf("log: %v", logs.All())
	}
	if s.Totals().Total != 3 {
		t.Fatalf("connections past the limit were served: %+v", s.Totals())
	}
	open[0].Close()
	waitFor(t, func() bool { return s.Totals().Active == 2 })
	if c := dial(); closed(c) {
		t.Fatal("a connection under the limit again was closed")
	}
}

func TestMaxConnections(t *testing.T) {
	for nofile, want := range map[uint64]int64{0: 65536, 100: 64, 20000: 2500, 1 << 20: 65536} {
		if got := MaxConnections(nofile); got != want {
			t.Errorf("MaxConnections(%d) = %d, want %d", nofile, got, want)
		}
	}
}

// BenchmarkPingPong: a 64-byte round trip through a stream route with
// timeouts (the copy loop of copyWithin, both ways).
func BenchmarkPingPong(b *testing.B) {
	up := tcptest.Serve(b, func(c net.Conn) { _, _ = io.Copy(c, c); c.Close() })
	s := NewServer(nil)
	r := Route{Targets: []string{up}, IdleTimeoutMS: 60000, WriteTimeoutMS: 60000}
	r.ID, r.ServiceID, r.ListenAddr = 1, 1, "127.0.0.1:0"
	s.Apply([]Route{r}, nil)
	defer s.Close(b.Context())
	c, err := net.Dial("tcp", s.Bound()[r.ListenAddr])
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
}
