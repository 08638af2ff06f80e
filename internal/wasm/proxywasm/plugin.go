package proxywasm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/internal/wasm/membudget"
)

// PluginConfig is what a plugin's instances are started with.
type PluginConfig struct {
	// Name, RootID and VMID are the plugin_name, plugin_root_id and
	// plugin_vm_id properties. VMID also keys the shared data and metrics
	// (default: the module's sha256).
	Name   string
	RootID string
	VMID   string
	// Configuration is the plugin configuration (PLUGIN_CONFIGURATION
	// buffer, proxy_on_configure); VMConfiguration the VM's.
	Configuration   []byte
	VMConfiguration []byte
	// Logger receives proxy_log, stdout and stderr.
	Logger *zap.Logger
	// CallTimeout bounds each callback (default DefaultCallTimeout).
	CallTimeout time.Duration
	// MaxIdle bounds the idle instances kept (default MaxInstances). An
	// instance serves a request from its request headers to its response,
	// upstream round trip included, so as many are busy as requests are in
	// flight: keeping fewer idle makes every burst beyond them instantiate
	// modules again (measured: 12% of the proxy's CPU at 50 connections
	// with 8 kept). Keeping them does not raise the memory bound, which
	// MaxInstances sets.
	MaxIdle int
	// MaxInstances bounds the instances alive at once, idle or serving
	// (default max(64, GOMAXPROCS*32)); Get waits for one beyond.
	MaxInstances int
	// MaxWait bounds that wait (default 5s), after which Get fails with
	// ErrBusy.
	MaxWait time.Duration
	// Memory is the budget the instances' linear memories are charged to
	// (default membudget.Default, the process's). memory.grow fails in an
	// instance beyond it; while it has no room for a new instance's
	// initial memory, Get fails with ErrMemory; while it is pressed,
	// instances given back are closed, not kept idle.
	Memory *membudget.Budget
}

func (c PluginConfig) withDefaults() PluginConfig {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.MaxInstances <= 0 {
		c.MaxInstances = max(64, runtime.GOMAXPROCS(0)*32)
	}
	if c.MaxIdle <= 0 {
		c.MaxIdle = c.MaxInstances
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 5 * time.Second
	}
	if c.Memory == nil {
		c.Memory = membudget.Default
	}
	if c.MaxIdle > c.MaxInstances {
		c.MaxIdle = c.MaxInstances
	}
	return c
}

// Plugin is a module started with a plugin configuration: a pool of
// configured instances, and, when the module asks for ticks, a dedicated
// instance proxy_on_tick is called on.
type Plugin struct {
	cfg    PluginConfig
	module *Module
	shared *sharedStore

	idle    chan *Instance
	slots   chan struct{} // one token per live pooled instance
	created atomic.Int64

	mu     sync.Mutex
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// ErrBusy is returned by Get when every instance is in use and none was
// free within MaxWait (or before the context ended).
var ErrBusy = errors.New("every instance of the wasm plugin is busy")

// ErrMemory is returned by Get when the memory budget (PluginConfig.Memory)
// has no room for another instance. A plugin's first instance (NewPlugin)
// and its tick instance start regardless, charged to the budget: a budget
// held by requests in flight must not make config loads fail.
var ErrMemory = errors.New("the wasm memory limit is reached")

// NewPlugin starts a plugin of m: it starts one VM, creates the plugin root
// context and runs proxy_on_configure, failing when that returns false. The
// plugin holds its own reference to m until Close.
func NewPlugin(ctx context.Context, m *Module, cfg PluginConfig) (*Plugin, error) {
	cfg = cfg.withDefaults()
	if cfg.VMID == "" {
		cfg.VMID = m.SHA256
	}
	p := &Plugin{
		cfg:    cfg,
		module: m,
		shared: acquireShared(cfg.VMID),
		idle:   make(chan *Instance, cfg.MaxIdle),
		slots:  make(chan struct{}, cfg.MaxInstances),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	cache.mu.Lock()
	m.refs++
	cache.mu.Unlock()
	first, err := p.newInstance(ctx)
	if err != nil {
		m.Release()
		releaseShared(cfg.VMID)
		return nil, err
	}
	if first.tickPeriod > 0 {
		go p.runTicker(first)
	} else {
		close(p.done)
		p.slots <- struct{}{}
		p.Put(first)
	}
	return p, nil
}

func (p *Plugin) newInstance(ctx context.Context) (*Instance, error) {
	in, err := p.module.newVM(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := in.configure(); err != nil {
		in.close()
		return nil, err
	}
	p.created.Add(1)
	return in, nil
}

// Created is how many instances the plugin has started (a pool that works
// creates none per request in steady state).
func (p *Plugin) Created() int64 { return p.created.Load() }

// Get returns an instance for one exchange: an idle one, or a new one while
// fewer than MaxInstances are alive, or the next one returned within
// MaxWait and before ctx ends (else ErrBusy). Give it back with Put.
func (p *Plugin) Get(ctx context.Context) (*Instance, error) {
	select {
	case in := <-p.idle:
		return in, nil
	default:
	}
	select {
	case in := <-p.idle:
		return in, nil
	case p.slots <- struct{}{}:
	default:
		wait := time.NewTimer(p.cfg.MaxWait)
		defer wait.Stop()
		select {
		case in := <-p.idle:
			return in, nil
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ErrBusy
		case <-wait.C:
			return nil, ErrBusy
		}
	}
	if mem := p.cfg.Memory; !mem.Room(p.module.initialMemory) {
		<-p.slots
		return nil, fmt.Errorf("%w (%d of %d MiB in use)", ErrMemory, mem.Used()>>20, mem.Limit()>>20)
	}
	in, err := p.newInstance(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return in, nil
}

// Put returns an instance to the pool; an instance whose call failed,
// beyond MaxIdle, or given back while the memory budget is pressed, is
// closed.
func (p *Plugin) Put(in *Instance) {
	if in.broken == nil && !p.cfg.Memory.Pressed() {
		p.mu.Lock()
		if !p.closed {
			select {
			case p.idle <- in:
				p.mu.Unlock()
				return
			default:
			}
		}
		p.mu.Unlock()
	}
	in.close()
	<-p.slots
}

// Close stops the ticker, closes the idle instances and releases the
// module and its VM id's shared data. Instances still serving are closed
// when they are Put back.
func (p *Plugin) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	for {
		select {
		case in := <-p.idle:
			in.close()
			<-p.slots
			continue
		default:
		}
		break
	}
	p.mu.Unlock()
	<-p.done
	p.module.Release()
	releaseShared(p.cfg.VMID)
}

// runTicker calls proxy_on_tick on the dedicated instance every tick period
// the module set (at least MinTickPeriod). A failed tick discards the
// instance; a fresh one (started and configured again) takes over at the
// next period. Ticks cannot crowd out requests: a tick runs only in one of
// the process's tickSlots, and the next one waits at least tickRest times
// as long as the last one ran.
func (p *Plugin) runTicker(in *Instance) {
	defer close(p.done)
	period := in.tickPeriod
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			if in != nil {
				in.close()
			}
			return
		case <-t.C:
		}
		select {
		case tickSlots <- struct{}{}:
		case <-p.stop:
			if in != nil {
				in.close()
			}
			return
		}
		rest := p.tickOnce(&in)
		<-tickSlots
		if in == nil {
			t.Reset(max(period, rest))
			continue
		}
		if in.tickPeriod <= 0 {
			// ticks turned off: keep the root context until Close
			<-p.stop
			in.close()
			return
		}
		period = in.tickPeriod
		t.Reset(max(period, rest))
	}
}

// tickOnce runs one tick on *in, starting a fresh instance when it is nil
// and setting it to nil when the tick (or the start) fails; rest is how
// long the ticker waits at least before the next (tickRest times the
// time it took).
func (p *Plugin) tickOnce(in **Instance) (rest time.Duration) {
	start := time.Now()
	defer func() { rest = tickRest * time.Since(start) }()
	if *in == nil {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		fresh, err := p.newInstance(ctx)
		cancel()
		if err != nil {
			p.cfg.Logger.Error("restarting the wasm plugin's tick instance", zap.Error(err))
			return
		}
		*in = fresh
	}
	if err := (*in).tick(); err != nil {
		p.cfg.Logger.Error("wasm plugin tick failed; the instance is discarded", zap.Error(err))
		(*in).close()
		*in = nil
	}
	return
}

// Describe names the plugin in errors and logs.
func (p *Plugin) Describe() string {
	return fmt.Sprintf("wasm plugin %q (module %s)", p.cfg.Name, p.module.SHA256[:12])
}
