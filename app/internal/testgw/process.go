package testgw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

// Process is a gateway binary run the way `make run` runs it, for the
// tests of the binary and of a cluster of nodes: `run` with the shipped
// Caddyfile, in a fresh working directory holding ./data (the SQLite store
// and Caddy's admin socket) and serving as HOME and XDG directories, its
// admin API on a free port, its output kept in Logs. It can be started
// again after it exited or was killed; the test's cleanup kills it.
type Process struct {
	Name  string // in failure messages
	Dir   string
	Admin string // the admin API's host:port (GATEWAY_ADMIN_LISTEN)
	// Cookie, when set, goes with every admin request (a signed-in
	// session).
	Cookie string
	Logs   *Logs
	// Caddyfile, when set, is run instead of the shipped one.
	Caddyfile string
	// AddressSpace, when set, limits the process's address space (bytes,
	// RLIMIT_AS set by the shell's ulimit before it runs the binary): a
	// test of what may exhaust memory then fails with the process's death
	// instead of exhausting the machine.
	AddressSpace uint64

	t      testing.TB
	binary string
	env    []string
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
}

// NewProcess prepares binary (not started) as name with env added to the
// test's environment (the Caddyfile's GATEWAY_* variables other than
// GATEWAY_ADMIN_LISTEN).
func NewProcess(t testing.TB, name, binary string, env ...string) *Process {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil { // as make run does
		t.Fatal(err)
	}
	p := &Process{Name: name, Dir: dir, Admin: FreeAddr(t), Logs: &Logs{}, t: t, binary: binary}
	p.env = append(os.Environ(), "GATEWAY_ADMIN_LISTEN="+p.Admin, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	p.env = append(p.env, env...)
	t.Cleanup(p.Kill)
	return p
}

// Start runs the process; Done is closed when it exits.
func (p *Process) Start() {
	p.t.Helper()
	config := p.Caddyfile
	if config == "" {
		config = filepath.Join(RepoRoot(), "Caddyfile")
	}
	cmd := exec.Command(p.binary, "run", "--config", config, "--adapter", "caddyfile")
	if p.AddressSpace > 0 {
		cmd = exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, p.AddressSpace>>10)}, cmd.Args...)...)
	}
	cmd.Dir = p.Dir
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = p.Logs, p.Logs
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() { p.err = cmd.Wait(); close(done) }()
}

// WaitLoaded waits until the process serves its stored configuration
// (GET /api/v1/config tells when it was applied); the test fails if the
// process exits first or takes longer than within.
func (p *Process) WaitLoaded(within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, body := p.Do("GET", "/api/v1/config", nil)
		var cfg map[string]any
		if st == 200 && json.Unmarshal(body, &cfg) == nil && cfg["applied_at"] != nil {
			return
		}
		select {
		case <-p.done:
			p.t.Fatalf("%s exited at start:\n%s", p.Name, p.Logs.String())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not load its configuration: %d %s\n%s", p.Name, st, body, p.Logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var adminClient = &http.Client{Timeout: 30 * time.Second}

// Do is one admin API request with body as JSON: status and body (0 and
// the error when the process does not answer).
func (p *Process) Do(method, path string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+p.Admin+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.Cookie != "" {
		req.Header.Set("Cookie", p.Cookie)
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// Must is an admin request that must answer 200; its JSON object.
func (p *Process) Must(method, path string, body any) map[string]any {
	p.t.Helper()
	st, b := p.Do(method, path, body)
	if st != 200 {
		p.t.Fatalf("%s %s on %s: %d %s", method, path, p.Name, st, b)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// Done is closed when the process last started has exited; Err is then
// how it ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit of the process last started (nil: exit status 0), valid
// once Done is closed.
func (p *Process) Err() error { return p.err }

// Signal sends sig to the running process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill ends the process at once (SIGKILL: a crash) and waits for it; a
// process that is not running is left as it is.
func (p *Process) Kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// CaddyAdmin is a request to Caddy's own admin endpoint, the unix socket
// the shipped Caddyfile puts under ./data (it answers while the store is
// unreachable).
func (p *Process) CaddyAdmin(method, path string) (*http.Response, error) {
	return caddycmd.AdminAPIRequest("unix/"+p.CaddySocket(), method, path, nil, nil)
}

// CaddySocket is the path of Caddy's admin socket.
func (p *Process) CaddySocket() string { return filepath.Join(p.Dir, "data", "caddy-admin.sock") }

// Logs is a process's output, written by the process and read by the test
// at the same time.
type Logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// RepoRoot is the repository's top folder (where the Caddyfile and go.mod
// are), found from this file's place in it.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
