// Package testgw runs a real gateway in the test process: Caddy loaded with
// the gateway app, a fresh SQLite store in a temp folder, admin API and proxy
// listeners on free 127.0.0.1 ports. caddy.Load is process-global, so one
// gateway runs at a time: tests using it must not call t.Parallel. It has
// no tests of its own: it is exercised by the tests that use it
// (app/tests and the features' tests under app).
package testgw

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-gateway/gateway"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/internal/pgtest"
)

// Gateway is a running gateway.
type Gateway struct {
	T          testing.TB
	AdminURL   string // http://127.0.0.1:port of the gateway admin API
	ProxyAddr  string // 127.0.0.1:port of the HTTP proxy listener
	ProxyURL   string // http://ProxyAddr
	CaddyAdmin string // Caddy's own admin endpoint
	DSN        string // SQLite file
	Header     http.Header
	Client     *http.Client

	// OpenAPI validates every admin answer against the served document
	// (nil when Options.NoOpenAPICheck).
	OpenAPI *Validator
}

// Options tune Start.
type Options struct {
	// DSN reuses a store (restart tests); default: a new temp file.
	DSN string
	// Apps adds the user's own apps (e.g. an "http" app with site routes)
	// to the bootstrap config, as a Caddyfile's site blocks would.
	Apps map[string]any
	// HealthInterval for active checks (default 10 s).
	HealthInterval time.Duration
	// Gateway adds fields to the gateway app's bootstrap config.
	Gateway map[string]any
	// LogFile receives the process's default log at level INFO (tests of
	// the log lines); default: errors only, on stderr.
	LogFile string
	// NoOpenAPICheck turns off the validation of admin answers against the
	// served OpenAPI document.
	NoOpenAPICheck bool
	// Starting runs right after the bootstrap config was loaded, while the
	// gateway loads its stored configuration, with the bootstrap config
	// (tests of what may run concurrently with startup, such as a reload).
	Starting func(bootstrap []byte)
}

// FreeAddr returns a free 127.0.0.1:port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return freeAddrs(t, 1)[0]
}

// freeAddrs returns n distinct free 127.0.0.1 addresses: FreeAddr's port
// is free again once it returns, and the kernel may hand it out again to
// the next call, so all n are held until every one is picked.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// RefusingAddr is a 127.0.0.1 address that refuses connections for the
// whole test and that no other listener can take meanwhile (FreeAddr's
// port is free again once it returns, so a later listener may get it): a
// TCP socket bound without SO_REUSEADDR and never listening.
func RefusingAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// proxyBound waits until the gateway has loaded its stored config and
// tells whether its HTTP proxy listener is bound.
func proxyBound() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := controlplane.WaitReady(ctx); err != nil {
		return false
	}
	cp := controlplane.Current()
	return cp != nil && cp.ProxyAddr(false) != ""
}

// storages holds each test's own Caddy storage folder.
var storages sync.Map // testing.TB → *certmagic.FileStorage

// useTestStorage points Caddy's default storage (where the gateway keeps
// certificates and ACME accounts on SQLite) at a folder of the test's own.
// caddy.DefaultStorage is fixed from $HOME at package init, before any
// TestMain could set XDG_DATA_HOME, so without this every test run shares
// one folder: an ACME account registered with a test CA on a port the OS
// hands out again later would show up as already registered. Gateways of
// one test (restarts) share the folder.
func useTestStorage(t testing.TB) {
	st, ok := storages.Load(t)
	if !ok {
		st = &certmagic.FileStorage{Path: t.TempDir()}
		storages.Store(t, st)
		t.Cleanup(func() { storages.Delete(t) })
	}
	caddy.DefaultStorage = st.(*certmagic.FileStorage)
}

// EachStore runs run on a gateway of each store: SQLite (subtest
// "sqlite") and PostgreSQL ("postgres", StartOnPostgres).
func EachStore(t *testing.T, run func(t *testing.T, g *Gateway)) {
	t.Run("sqlite", func(t *testing.T) { run(t, Start(t, nil)) })
	t.Run("postgres", func(t *testing.T) { run(t, StartOnPostgres(t)) })
}

// StartOnPostgres starts a PostgreSQL server (package pgtest) and a
// gateway whose store it is. Skipped with -short (by pgtest.Start).
func StartOnPostgres(t testing.TB) *Gateway {
	t.Helper()
	dsn := pgtest.Start(t).DSN
	return Start(t, &Options{Gateway: map[string]any{"database": "postgres", "dsn": dsn}})
}

// Start loads a gateway and waits until it serves its stored config.
// It is stopped when the test ends.
func Start(t testing.TB, opts *Options) *Gateway {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	useTestStorage(t)
	var g *Gateway
	var adminAddr string
	// Free ports are picked, then bound: another test process may take one
	// in between. Such a clash is retried with new ports, and a new store:
	// the first load seeds the store's settings with its listen addresses,
	// which then win over the next attempt's.
	for attempt := 1; ; attempt++ {
		dsn := opts.DSN
		if dsn == "" {
			dsn = filepath.Join(t.TempDir(), "gateway.db")
		}
		// four distinct ports: the stored https_listen must not collide
		// with the admin listener, or a later PUT /api/v1/settings is 400
		free := freeAddrs(t, 4)
		g = &Gateway{
			T:          t,
			CaddyAdmin: free[0],
			ProxyAddr:  free[1],
			DSN:        dsn,
			Header:     http.Header{},
			Client:     &http.Client{Timeout: 30 * time.Second},
		}
		adminAddr = free[2]
		g.AdminURL = "http://" + adminAddr
		g.ProxyURL = "http://" + g.ProxyAddr
		gw := map[string]any{
			"admin_listen": adminAddr,
			"dsn":          dsn,
			"http_listen":  g.ProxyAddr,
			"https_listen": free[3],
			"caddy_admin":  g.CaddyAdmin,
		}
		if opts.HealthInterval > 0 {
			gw["health_interval"] = opts.HealthInterval.String()
		}
		for k, v := range opts.Gateway {
			gw[k] = v
		}
		apps := map[string]any{"gateway": gw}
		for k, v := range opts.Apps {
			apps[k] = v
		}
		defaultLog := map[string]any{"level": "ERROR"}
		if opts.LogFile != "" {
			defaultLog = map[string]any{"level": "INFO", "writer": map[string]any{"output": "file", "filename": opts.LogFile}}
		}
		cfg := map[string]any{
			"admin":   map[string]any{"listen": g.CaddyAdmin},
			"logging": map[string]any{"logs": map[string]any{"default": defaultLog}},
			"apps":    apps,
		}
		raw, _ := json.Marshal(cfg)
		err := caddy.Load(raw, true)
		if err == nil && opts.Starting != nil {
			opts.Starting(raw)
		}
		if err == nil && opts.DSN == "" && attempt < 3 && !proxyBound() {
			// The free proxy port was taken before the stored config
			// bound it (another test process): try new ports.
			_ = caddy.Stop()
			continue
		}
		if err == nil {
			break
		}
		if attempt < 3 && strings.Contains(err.Error(), "address already in use") {
			_ = caddy.Stop()
			continue
		}
		t.Fatalf("loading gateway: %v", err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := controlplane.WaitReady(ctx); err != nil {
		t.Fatalf("gateway not ready: %v", err)
	}
	if cp := controlplane.Current(); cp == nil || cp.AdminAddr() != adminAddr {
		got := "none"
		if cp != nil {
			got = cp.AdminAddr()
		}
		t.Fatalf("the running control plane serves its admin API on %s, not on %s: a previous gateway of this process was not stopped", got, adminAddr)
	}
	if !opts.NoOpenAPICheck {
		g.OpenAPI = LoadValidator(t, g.AdminURL)
	}
	// A restarted store may have other listener settings.
	if cp := controlplane.Current(); cp != nil {
		if a := cp.ProxyAddr(false); a != "" {
			g.ProxyAddr = a
			g.ProxyURL = "http://" + a
		}
	}
	return g
}

// Do sends an admin API request; body is JSON-encoded unless it is a string
// or []byte (sent as is).
func (g *Gateway) Do(method, path string, body any) (int, []byte) {
	g.T.Helper()
	return g.DoFor(g.T, method, path, body)
}

// DoFor is Do failing t rather than the test that started the gateway: for
// a fuzz function or a subtest, which has a T of its own.
func (g *Gateway) DoFor(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	req, raw := NewAdminRequest(t, method, g.AdminURL+path, body)
	for k, v := range g.Header {
		req.Header[k] = v
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (a handler panicked?)", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if g.OpenAPI != nil {
		req.Body = io.NopCloser(bytes.NewReader(raw))
		g.OpenAPI.Check(t, req, resp, out)
	}
	return resp.StatusCode, out
}

// NewAdminRequest builds an admin API request to url. body is nil, a
// string or []byte sent as is, or a value sent as JSON; a request with a
// body is marked JSON. It returns the body's bytes too, for the OpenAPI
// check of the answer.
func NewAdminRequest(t testing.TB, method, url string, body any) (*http.Request, []byte) {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, raw
}

// JSON sends a request and decodes the answer into out (when non-nil).
func (g *Gateway) JSON(method, path string, body, out any) int {
	g.T.Helper()
	st, b := g.Do(method, path, body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			g.T.Fatalf("%s %s: decoding %q: %v", method, path, b, err)
		}
	}
	return st
}

// Must sends a request that must answer 200 and returns the decoded object.
func (g *Gateway) Must(method, path string, body any) map[string]any {
	g.T.Helper()
	st, b := g.Do(method, path, body)
	if st != http.StatusOK {
		g.T.Fatalf("%s %s: status %d: %s", method, path, st, b)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		g.T.Fatalf("%s %s: decoding %q: %v", method, path, b, err)
	}
	return out
}

// ID reads the "id" of an answer.
func ID(v map[string]any) int64 {
	n, _ := v["id"].(float64)
	return int64(n)
}

// Service creates a service with targets at the given addresses and a route
// with the given fields; it returns the service and route ids.
func (g *Gateway) Service(name string, addrs ...string) int64 {
	g.T.Helper()
	svc := g.Must("POST", "/api/v1/services", map[string]any{"name": name})
	id := ID(svc)
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		var p int
		fmt.Sscan(port, &p)
		g.Must("POST", fmt.Sprintf("/api/v1/services/%d/targets", id), map[string]any{"host": host, "port": p})
	}
	return id
}

// Route creates a route; fields are merged over {name, service_id}.
func (g *Gateway) Route(name string, serviceID int64, fields map[string]any) int64 {
	g.T.Helper()
	body := map[string]any{"name": name, "service_id": serviceID}
	for k, v := range fields {
		body[k] = v
	}
	return ID(g.Must("POST", "/api/v1/routes", body))
}

// List GETs an admin list endpoint; anything but 200 with an array ends
// the test.
func (g *Gateway) List(path string) []map[string]any {
	g.T.Helper()
	var out []map[string]any
	if st := g.JSON("GET", path, nil, &out); st != 200 {
		g.T.Fatalf("GET %s: %d", path, st)
	}
	if out == nil {
		g.T.Fatalf("GET %s: not an array", path)
	}
	return out
}

// Paths are the fields of a route that matches the path prefixes p.
func Paths(p ...string) map[string]any { return map[string]any{"paths": p} }

// PathRoutes creates one route of service serviceID per path prefix,
// named after it ("/acl-only": "acl-only"), and returns their ids in order.
func (g *Gateway) PathRoutes(serviceID int64, paths ...string) []int64 {
	g.T.Helper()
	ids := make([]int64, len(paths))
	for i, p := range paths {
		ids[i] = g.Route(strings.TrimPrefix(p, "/"), serviceID, Paths(p))
	}
	return ids
}

// DeadService creates a service whose one target refuses connections,
// without retries: every request it serves fails with a 5xx.
func (g *Gateway) DeadService(name string) int64 {
	g.T.Helper()
	id := g.Service(name, FreeAddr(g.T))
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", id), map[string]any{"name": name, "retries": 0})
	return id
}

// Consumer creates a consumer with the given credentials (bodies of the
// credential create endpoint) and returns its id.
func (g *Gateway) Consumer(username string, credentials ...map[string]any) int64 {
	g.T.Helper()
	id := ID(g.Must("POST", "/api/v1/consumers", map[string]any{"username": username}))
	for _, c := range credentials {
		g.Must("POST", fmt.Sprintf("/api/v1/consumers/%d/credentials", id), c)
	}
	return id
}

// Get sends a proxied GET with an optional Host.
func (g *Gateway) Get(host, path string) (int, string, http.Header) {
	g.T.Helper()
	req, err := http.NewRequest("GET", g.ProxyURL+path, nil)
	if err != nil {
		g.T.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		g.T.Fatalf("proxy GET %s%s: %v", host, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// CaddyConfig GETs path (such as "/config/") from Caddy's own admin
// endpoint at addr: the running config, or a part of it. A failure or a
// status other than 200 ends t.
func CaddyConfig(t testing.TB, addr, path string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// CaddyConfigFiles reads the files in Caddy's config folder (its autosaved
// config among them), by path, for the tests of what must never be
// written there.
func CaddyConfigFiles() map[string][]byte {
	files := map[string][]byte{}
	_ = filepath.WalkDir(caddy.AppConfigDir(), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(path); err == nil {
				files[path] = b
			}
		}
		return nil
	})
	return files
}
