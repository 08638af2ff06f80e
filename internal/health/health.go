// Package health runs the gateway's active health checks: HTTP GET of a
// service's health_path, or a TCP connect when it has none. Checkers live in a
// Registry owned by the gateway app's control plane, which outlives config
// reloads, so that target state survives them (Caddy's own active checks
// reset on every reload and have no TCP mode); the gateway's selection
// policy reaches it through the gateway app (Owner, ctx.App) and reads the
// state on every request.
package health

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/internal/guard"
)

// Checking parameters (docs/operations.md): every 10 s; two failures mark a target
// unhealthy, one success healthy.
const (
	DefaultInterval = 10 * time.Second
	FailThreshold   = 2
)

// Owner is implemented by the app that owns the process's registry (the
// gateway app): modules reach it with ctx.App and keep its registry.
type Owner interface {
	HealthRegistry() *Registry
}

// registryKey is the context key of WithRegistry.
type registryKey struct{}

// WithRegistry returns ctx carrying reg, for modules provisioned outside
// any config (the gateway's shared service proxies, package modpool),
// which have no gateway app to ask.
func WithRegistry(ctx caddy.Context, reg *Registry) caddy.Context {
	return ctx.WithValue(registryKey{}, reg)
}

// RegistryFrom is the registry WithRegistry put into ctx, or nil.
func RegistryFrom(ctx context.Context) *Registry {
	reg, _ := ctx.Value(registryKey{}).(*Registry)
	return reg
}

// Spec describes one target to check.
type Spec struct {
	ServiceID int64  `json:"service_id"`
	TargetID  int64  `json:"target_id"`
	Host      string `json:"host"`
	Port      int    `json:"port"`
	// Path is the HTTP health path; empty selects a TCP connect check.
	Path string `json:"path,omitempty"`
	// HTTPS checks over verified TLS with SNI (defaulting to Host).
	HTTPS bool   `json:"https,omitempty"`
	SNI   string `json:"sni,omitempty"`
	// GRPC checks with the gRPC health-checking protocol over HTTP/2
	// (h2c, or TLS with HTTPS): Path names the service, "/" the server.
	GRPC bool `json:"grpc,omitempty"`
	// Timeout of one check (the service's connect timeout); default 5 s.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Addr is the target's dial address.
func (s Spec) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// State of a target.
type State string

// States.
const (
	Unknown   State = "unknown"
	Healthy   State = "healthy"
	Unhealthy State = "unhealthy"
)

// Status is a target's current health as reported by /api/v1/health.
type Status struct {
	TargetID      int64      `json:"target_id"`
	ServiceID     int64      `json:"service_id"`
	Host          string     `json:"host"`
	Port          int        `json:"port"`
	Address       *string    `json:"address"`
	State         State      `json:"state" schema:"enum=healthy|unhealthy|unknown" doc:"unknown until the first check."`
	Check         string     `json:"check" schema:"enum=http|tcp|grpc,extension=grpc" doc:"http: GET health_path; tcp: a connect (blank health_path); grpc (an extension, grpc and grpcs services): grpc.health.v1.Health/Check of the service health_path names."`
	LastCheckedAt *time.Time `json:"last_checked_at"`
	LastError     *string    `json:"last_error"`
}

type key struct {
	serviceID int64
	addr      string
}

// Registry owns the checkers. The zero value is not usable: NewRegistry.
type Registry struct {
	mu       sync.Mutex
	checkers map[key]*checker
	probes   map[probeKey]*probe
	index    atomic.Pointer[map[key]*checker] // read on the request path

	// interval is every probe's; a change closes (and replaces)
	// intervalChanged, so the running probes take it at once.
	interval        atomic.Int64
	intervalChanged chan struct{}
}

// NewRegistry returns an empty registry checking every interval (0: 10 s).
func NewRegistry(interval time.Duration) *Registry {
	if interval <= 0 {
		interval = DefaultInterval
	}
	r := &Registry{checkers: map[key]*checker{}, probes: map[probeKey]*probe{}, intervalChanged: make(chan struct{})}
	r.interval.Store(int64(interval))
	empty := map[key]*checker{}
	r.index.Store(&empty)
	return r
}

// Sync makes the registry check exactly specs: new targets get a checker
// (first check at once, unless a target checked the same way already has
// one running), removed ones are stopped, unchanged ones keep their state.
func (r *Registry) Sync(specs []Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unchanged(specs) {
		return // the usual change: no target or service check moved
	}
	want := make(map[key]Spec, len(specs))
	for _, s := range specs {
		want[key{s.ServiceID, s.Addr()}] = s
	}
	for k, c := range r.checkers {
		if s, ok := want[k]; !ok || s != c.spec {
			r.release(c.probe)
			delete(r.checkers, k)
		}
	}
	for k, s := range want {
		if _, ok := r.checkers[k]; !ok {
			r.checkers[k] = &checker{spec: s, probe: r.acquire(s)}
		}
	}
	idx := make(map[key]*checker, len(r.checkers))
	for k, c := range r.checkers {
		idx[k] = c
	}
	r.index.Store(&idx)
}

// acquire returns the running probe that checks like s, or starts one
// (r.mu held).
func (r *Registry) acquire(s Spec) *probe {
	k := probeKey{check: s}
	k.check.ServiceID, k.check.TargetID = 0, 0
	if p, ok := r.probes[k]; ok {
		p.refs++
		return p
	}
	p := newProbe(k, r)
	p.refs = 1
	r.probes[k] = p
	go p.run()
	return p
}

// release stops p when no checker uses it any more (r.mu held).
func (r *Registry) release(p *probe) {
	if p.refs--; p.refs == 0 {
		p.cancel()
		delete(r.probes, p.key)
	}
}

// unchanged reports whether specs are exactly the checked targets (r.mu
// held).
func (r *Registry) unchanged(specs []Spec) bool {
	if len(specs) != len(r.checkers) {
		return false
	}
	for _, s := range specs {
		c, ok := r.checkers[key{s.ServiceID, s.Addr()}]
		if !ok || c.spec != s {
			return false
		}
	}
	return true
}

// Healthy reports whether the target of service at addr may receive traffic:
// true unless its checks marked it unhealthy (unknown targets are healthy).
func (r *Registry) Healthy(serviceID int64, addr string) bool {
	c := (*r.index.Load())[key{serviceID, addr}]
	return c == nil || c.probe.state.Load() != stateUnhealthy
}

// Statuses lists every checked target, by service id then target id.
func (r *Registry) Statuses() []Status {
	idx := *r.index.Load()
	out := make([]Status, 0, len(idx))
	for _, c := range idx {
		out = append(out, c.status())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ServiceID != out[j].ServiceID {
			return out[i].ServiceID < out[j].ServiceID
		}
		return out[i].TargetID < out[j].TargetID
	})
	return out
}

// Status returns one target's status (ok false when not checked).
func (r *Registry) Status(serviceID int64, addr string) (Status, bool) {
	c := (*r.index.Load())[key{serviceID, addr}]
	if c == nil {
		return Status{}, false
	}
	return c.status(), true
}

// SetInterval changes every probe's interval (d ≤ 0: DefaultInterval):
// each checks once at once, then every d. Probes keep their state.
func (r *Registry) SetInterval(d time.Duration) {
	if d <= 0 {
		d = DefaultInterval
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.interval.Swap(int64(d)) != int64(d) {
		close(r.intervalChanged)
		r.intervalChanged = make(chan struct{})
	}
}

// Interval is the probes' interval.
func (r *Registry) Interval() time.Duration { return time.Duration(r.interval.Load()) }

// changes is the channel closed at the next interval change.
func (r *Registry) changes() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.intervalChanged
}

// Stop stops every checker.
func (r *Registry) Stop() { r.Sync(nil) }

const (
	stateUnknown int32 = iota
	stateHealthy
	stateUnhealthy
)

// checker is one checked target of one service: its spec and the probe
// that checks its address.
type checker struct {
	spec  Spec
	probe *probe
}

// probeKey is what makes two checks the same: a target's spec without its
// service and target ids.
type probeKey struct {
	check Spec
}

// probe runs the checks of one address, path, TLS setting and timeout.
// Targets of several services that point at the same backend share it,
// so 10,000 targets on two backends make two checks per interval, not
// 10,000 (bench/README.md, "Session 5: 5,000 services").
type probe struct {
	key    probeKey
	reg    *Registry // its interval
	refs   int       // checkers using it (Registry.mu)
	state  atomic.Int32
	ctx    context.Context
	cancel context.CancelFunc
	client *http.Client

	mu          sync.Mutex
	fails       int
	lastChecked time.Time
	lastErr     string
	address     string
}

func newProbe(k probeKey, r *Registry) *probe {
	ctx, cancel := context.WithCancel(context.Background())
	c := &probe{key: k, reg: r, ctx: ctx, cancel: cancel}
	if s := k.check; s.Path != "" {
		sni := s.SNI
		if sni == "" {
			sni = s.Host
		}
		tr := &http.Transport{
			Proxy:             nil, // health checks never go through an environment proxy
			TLSClientConfig:   &tls.Config{ServerName: sni},
			DisableKeepAlives: true,
		}
		if s.GRPC {
			tr.Protocols = new(http.Protocols)
			if s.HTTPS {
				tr.Protocols.SetHTTP2(true)
			} else {
				tr.Protocols.SetUnencryptedHTTP2(true)
			}
		}
		c.client = &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return c
}

func (c *probe) run() {
	for {
		changed := c.reg.changes()
		t := time.NewTicker(c.reg.Interval())
		for stop := false; !stop; {
			c.checkOnce()
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-changed:
				stop = true
			case <-t.C:
			}
		}
		t.Stop()
	}
}

func (c *probe) timeout() time.Duration {
	if c.key.check.Timeout > 0 {
		return c.key.check.Timeout
	}
	return 5 * time.Second
}

func (c *probe) checkOnce() {
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout())
	defer cancel()
	addr, err := c.resolve(ctx)
	if err == nil {
		if c.key.check.Path == "" {
			err = c.checkTCP(ctx, addr)
		} else if c.key.check.GRPC {
			err = c.checkGRPC(ctx, addr)
		} else {
			err = c.checkHTTP(ctx, addr)
		}
	}
	if c.ctx.Err() != nil {
		return // stopped mid-check
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastChecked = time.Now().UTC()
	if err != nil {
		c.lastErr = err.Error()
		c.fails++
		if c.fails >= FailThreshold {
			c.state.Store(stateUnhealthy)
		}
		return
	}
	c.lastErr = ""
	c.fails = 0
	c.state.Store(stateHealthy)
}

// resolve finds the address the check (and the proxy) dials.
func (c *probe) resolve(ctx context.Context) (string, error) {
	host := c.key.check.Host
	if net.ParseIP(host) == nil {
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			return "", fmt.Errorf("resolving %s: %w", host, err)
		}
		if len(ips) == 0 {
			return "", fmt.Errorf("resolving %s: no addresses", host)
		}
		host = ips[0]
	}
	addr := net.JoinHostPort(host, strconv.Itoa(c.key.check.Port))
	c.mu.Lock()
	c.address = addr
	c.mu.Unlock()
	return addr, nil
}

func (c *probe) checkTCP(ctx context.Context, addr string) error {
	conn, err := guard.Dialer(&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

func (c *probe) checkHTTP(ctx context.Context, addr string) error {
	// Dial the resolved address, but keep the target's host name in the URL
	// so Host and SNI are right.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(c.key.check.Path), nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, addr)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("health check %s answered %d", c.key.check.Path, resp.StatusCode)
	}
	return nil
}

// url is the check's URL for path, on the target's host name.
func (c *probe) url(path string) string {
	scheme := "http"
	if c.key.check.HTTPS {
		scheme = "https"
	}
	return scheme + "://" + c.key.check.Addr() + path
}

// do sends a check request to the resolved address addr.
func (c *probe) do(req *http.Request, addr string) (*http.Response, error) {
	tr := c.client.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		// Never an HTTP request to an admin endpoint (package guard), even
		// when the target's name resolves to one.
		return guard.Dialer(&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return c.client.Do(req)
}

func (c *checker) status() Status {
	p := c.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{TargetID: c.spec.TargetID, ServiceID: c.spec.ServiceID, Host: c.spec.Host, Port: c.spec.Port, Check: "tcp"}
	if c.spec.Path != "" {
		st.Check = "http"
		if c.spec.GRPC {
			st.Check = "grpc"
		}
	}
	switch p.state.Load() {
	case stateHealthy:
		st.State = Healthy
	case stateUnhealthy:
		st.State = Unhealthy
	default:
		st.State = Unknown
	}
	if p.address != "" {
		a := p.address
		st.Address = &a
	}
	if !p.lastChecked.IsZero() {
		t := p.lastChecked
		st.LastCheckedAt = &t
	}
	if p.lastErr != "" {
		e := p.lastErr
		st.LastError = &e
	}
	return st
}
