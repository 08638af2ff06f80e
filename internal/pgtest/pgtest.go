// Package pgtest runs a throw-away PostgreSQL server for tests, in a
// temporary folder on 127.0.0.1 (Debian's postgresql package; `make
// test-deps` installs it). Without the server binaries the test is skipped,
// except on CI where it fails. Its tests are those that use it
// (app/tests/pgstore, app/tests/cluster, modules/pgstorage,
// app/auth).
package pgtest

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

// Server is a running (or stopped) PostgreSQL server.
type Server struct {
	// DSN is a keyword/value connection string (user gw, database
	// postgres, trust authentication).
	DSN  string
	Port int

	t    testing.TB
	dir  string
	data string

	mu  sync.Mutex
	cmd *exec.Cmd
}

func bin(name string) string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return ""
	}
	return matches[len(matches)-1]
}

func command(args ...string) *exec.Cmd {
	if os.Geteuid() == 0 { // PostgreSQL refuses to run as root
		return exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
	}
	return exec.Command(args[0], args[1:]...)
}

// Start initializes and starts a server, stopped at the end of the test.
// Skipped with -short (a server takes seconds to start).
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	initdb, postgres := bin("initdb"), bin("postgres")
	if initdb == "" || postgres == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("PostgreSQL server binaries missing on CI (make test-deps installs the postgresql package)")
		}
		t.Skip("PostgreSQL server binaries not installed")
	}
	dir, err := os.MkdirTemp("", "gateway-pg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	s := &Server{t: t, dir: dir, data: filepath.Join(dir, "data")}
	if out, err := command(initdb, "-D", s.data, "-U", "gw", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// connect_timeout: a port taken meanwhile by something else must fail
	// the test, not hang it.
	s.DSN = fmt.Sprintf("host=127.0.0.1 port=%d user=gw dbname=postgres sslmode=disable connect_timeout=10", s.Port)
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// URL is the DSN in URL form.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://gw@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=10", s.Port)
}

// Stop stops the server at once (immediate mode: connections are cut).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = command(bin("pg_ctl"), "-D", s.data, "stop", "-m", "immediate").Run()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
	}
	s.cmd = nil
}

// Restart starts the stopped server again on the same port and data, and
// waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	cmd := command(bin("postgres"), "-D", s.data, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-k", s.dir,
		"-c", "max_connections=200")
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	// pg_isready asks the server itself (a bare TCP dial could reach
	// another process that took the port).
	for i := 0; ; i++ {
		if exec.Command(bin("pg_isready"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "gw", "-d", "postgres").Run() == nil {
			return
		}
		if i > 150 {
			s.t.Fatalf("postgres did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
