// Package redistest runs a throw-away Redis server for tests, in a
// temporary folder on 127.0.0.1 (Debian's redis-server package; `make
// test-deps` installs it). Without the binary the test is skipped, except on
// CI where it fails. Its tests are those of the shared rate limits
// (modules/plugins/ratelimit/shared, app/tests/cluster).
package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Server is a running (or stopped) Redis server.
type Server struct {
	Port int

	t   testing.TB
	dir string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts a server, stopped at the end of the test. Skipped with
// -short.
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Redis")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server missing on CI (make test-deps installs the redis-server package)")
		}
		t.Skip("redis-server not installed")
	}
	dir, err := os.MkdirTemp("", "gateway-redis")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, dir: dir, Port: ln.Addr().(*net.TCPAddr).Port}
	ln.Close()
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL (database 0, no password).
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Stop kills the server (SIGKILL: a crash, nothing saved).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the stopped server again on the same port (empty: no
// persistence) and waits until it answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.Port),
		"--dir", s.dir, "--save", "", "--appendonly", "no", "--protected-mode", "yes",
		"--logfile", filepath.Join(s.dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	for i := 0; ; i++ {
		if s.ping() {
			return
		}
		if i > 100 {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server did not start:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ping asks the server itself (a bare TCP dial could reach another process
// that took the port).
func (s *Server) ping() bool {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := c.Read(buf)
	return string(buf[:n]) == "+PONG\r\n"
}
