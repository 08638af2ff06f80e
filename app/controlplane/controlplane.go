// Package controlplane is what the gateway keeps for the life of the process
// across config reloads: the store, the admin server, the proxy listeners
// and servers, the live router, and the mutation path (Mutate: persist,
// compile with package compiler, caddy.Load, commit only when the load
// succeeded). The gateway app (package app) attaches every loaded
// config to it (For, Activate, Deactivate). Its tests run a real gateway:
// app/tests (reload, resilience, leak, streams, https and api tests)
// and the features' own tests.
package controlplane

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/compiler"
	"github.com/caddy-gateway/gateway/internal/configref"
	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/health"
	"github.com/caddy-gateway/gateway/internal/modpool"
	"github.com/caddy-gateway/gateway/internal/records"
	"github.com/caddy-gateway/gateway/internal/streams"
	"github.com/caddy-gateway/gateway/internal/wasm/membudget"
	"github.com/caddy-gateway/gateway/modules/router"
	"github.com/caddy-gateway/gateway/storage"
)

// ControlPlane owns what must survive config reloads: the store, the admin
// server, the proxy listeners and servers, the live router pointer, the
// mutation lock, target health and the TCP stream listeners.
type ControlPlane struct {
	logger *zap.Logger
	// boot is the bootstrap of the first app, its live values replaced by
	// those of every hand-written config since (`caddy reload`: reboot).
	boot  atomic.Pointer[Bootstrap]
	store *storage.Store

	adminLn  net.Listener
	adminSrv *http.Server
	admin    http.Handler // the admin API (SetAdmin)

	// mu serializes mutations and config loads.
	mu sync.Mutex
	// base is the rest of the running Caddy config (the user's own apps and
	// sites), captured after start and after every change of the running
	// config made through Caddy's admin API; generated configs keep it.
	// nil while it could not be read: nothing is compiled then.
	base map[string]json.RawMessage
	// loaded is the config the control plane loaded last (under mu), to
	// tell what a change through Caddy's admin API changed (rebase).
	loaded []byte
	// loading is the version of the compiled config being loaded by load:
	// a compiled config that goes live with another version was loaded
	// through Caddy's admin API.
	loading atomic.Int64
	// staleBase: Activate refused the config being loaded by load because
	// its base was stale (ErrBaseChanged).
	staleBase atomic.Bool
	// pending is the config loaded by others than the control plane (a
	// hand-written one, or a compiled one changed through Caddy's admin
	// API) whose base is not read yet (settle).
	pending atomic.Pointer[Instance]
	// table is the routing table of the last config that went live (under
	// mu); the next compile updates it with the changed routes.
	table *router.Table
	// liveProxies are the service proxies compiled for the live config
	// (under mu); the next compile reuses those of unchanged services.
	liveProxies compiler.ProxyCache
	// proxies provisions the service proxies once and shares them between
	// configs (proxypool.go); nil until the first compiled config.
	proxies *modpool.Pool

	router    atomic.Pointer[router.Router]
	tlsConfig atomic.Pointer[tls.Config]
	tlsApp    atomic.Pointer[caddytls.TLS]
	active    atomic.Pointer[Instance]
	applied   atomic.Pointer[Generated]
	appliedAt atomic.Pointer[time.Time]
	version   atomic.Int64

	lnMu      sync.Mutex
	listeners map[string]*proxyListener
	// h2c and http3 are the live settings of the proxy listeners' extra
	// protocols, read per connection (the listeners outlive configs).
	h2c, http3 atomic.Bool

	// health checks the targets of the live config; its state survives
	// reloads, or a request right after a mutation would go to a dead
	// target. The gateway selection policy reads it through the gateway
	// app (ctx.App).
	health *health.Registry
	// streams owns the TCP stream-route listeners: they bind once per
	// process and keep accepting across every config reload.
	streams *streams.Server

	observer Observer
	onReady  func()
	steps    []compiler.Step // the features' compile steps (AddCompileStep)
	// pluginRefs are the features' references of plugin types, by type
	// (AddPluginRefs).
	pluginRefs map[string]PluginRefs

	readyOnce sync.Once
	ready     chan struct{}
	isClosed  atomic.Bool

	services   servicesState // cluster.go
	syncFailed failedSync    // cluster.go (cp.mu)
	// unstored: the live config is one whose transaction did not commit
	// (the commit failed after the load and the store could not be read
	// back to restore). Its version label may be taken by another node's
	// commit, so SyncFromStore reloads whatever the stored version.
	unstored atomic.Bool
}

// Observer is handed the record of every completed proxied request
// (package observe's Recorder: metrics, recent requests, event stream, the
// request's own sinks).
type Observer interface {
	Observe(rc *records.Record, info *gwctx.Info)
	Close()
}

// nopObserver is the observer until SetObserver.
type nopObserver struct{}

func (nopObserver) Observe(*records.Record, *gwctx.Info) {}
func (nopObserver) Close()                               {}

func newControlPlane(a Bootstrap, logger *zap.Logger) (*ControlPlane, error) {
	store, err := storage.Open(a.Database, a.StoreDSN())
	if err != nil {
		return nil, fmt.Errorf("gateway store: %w", err)
	}
	if err := store.SeedSettings(*storage.NewSettings(a.HTTPListen, a.HTTPSListen)); err != nil {
		store.Close()
		return nil, fmt.Errorf("gateway store: %w", err)
	}
	if err := clampStoredBounds(store.DB, logger.Named("control_plane")); err != nil {
		store.Close()
		return nil, fmt.Errorf("gateway store: %w", err)
	}
	caddyAdmin := a.CaddyAdmin
	if caddyAdmin == "" {
		caddyAdmin = caddy.DefaultAdminListen
	}
	guard.Set("Caddy's admin endpoint", caddyAdmin)
	reg := health.NewRegistry(time.Duration(a.HealthInterval))
	cp := &ControlPlane{
		health:    reg,
		streams:   streams.NewServer(reg),
		logger:    logger.Named("control_plane"),
		store:     store,
		listeners: map[string]*proxyListener{},
		observer:  nopObserver{},
		admin:     http.NotFoundHandler(),
		ready:     make(chan struct{}),
	}
	cp.boot.Store(&a)
	return cp, nil
}

// SetAdmin installs the admin API handler (before the first Activate).
func (cp *ControlPlane) SetAdmin(h http.Handler) { cp.admin = h }

// SetObserver installs the observer of proxied requests (before the first
// Activate).
func (cp *ControlPlane) SetObserver(o Observer) { cp.observer = o }

func (cp *ControlPlane) closed() bool { return cp.isClosed.Load() }

// reboot takes the bootstrap of a hand-written config (`caddy reload` of an
// edited Caddyfile): its values replace the control plane's, and configs
// compiled from now on carry them, except the admin listener and the
// store, which are bound or opened once per process (a restart applies
// them; warned). The health interval reaches the running checks at once.
func (cp *ControlPlane) reboot(a Bootstrap) {
	cur := cp.Boot()
	if a.AdminListen != cur.AdminListen || a.Database != cur.Database || a.DSN != cur.DSN || a.PostgresDSN != cur.PostgresDSN {
		cp.logger.Warn("gateway admin_listen and database changes take effect after a restart",
			zap.String("admin_listen", cur.AdminListen), zap.String("database", cur.Database))
	}
	a.AdminListen, a.Database, a.DSN, a.PostgresDSN = cur.AdminListen, cur.Database, cur.DSN, cur.PostgresDSN
	cp.health.SetInterval(time.Duration(a.HealthInterval))
	cp.boot.Store(&a)
}

// applyWASMMemoryLimit sets the process's wasm memory budget from the
// bootstrap at every load (a plain atomic: it needs no restart).
func applyWASMMemoryLimit(a Bootstrap) {
	limit := a.WASMMemoryLimit
	if limit <= 0 {
		limit = membudget.DefaultLimit
	}
	membudget.Default.SetLimit(limit)
}

// Logger is the control plane's logger.
func (cp *ControlPlane) Logger() *zap.Logger { return cp.logger }

// Boot is the bootstrap configuration (Caddyfile values).
func (cp *ControlPlane) Boot() Bootstrap { return *cp.boot.Load() }

// DefaultSettings are the settings with every default (the proxy listeners
// from the Caddyfile).
func (cp *ControlPlane) DefaultSettings() *storage.Settings {
	boot := cp.Boot()
	return storage.NewSettings(boot.HTTPListen, boot.HTTPSListen)
}

// Applied is the live compiled configuration and when it went live (nil
// before the first).
func (cp *ControlPlane) Applied() (*Generated, *time.Time) {
	return cp.applied.Load(), cp.appliedAt.Load()
}

// Store is the control plane's store.
func (cp *ControlPlane) Store() *storage.Store { return cp.store }

// Health is the target health registry (checks of the live config).
func (cp *ControlPlane) Health() *health.Registry { return cp.health }

// Streams is the TCP stream-route server (listeners and counters).
func (cp *ControlPlane) Streams() *streams.Server { return cp.streams }

// Router is the live router (nil before the first compiled config).
func (cp *ControlPlane) Router() *router.Router { return cp.router.Load() }

// Activate makes a the live instance (the gateway app's Start).
func (cp *ControlPlane) Activate(a *Instance) error {
	if err := cp.startAdmin(); err != nil {
		return err
	}
	a.prev.Store(cp.active.Load())
	if a.Generated == nil {
		// A hand-written config (process start, or `caddy reload`): keep
		// serving the current router, and once Caddy has finished this
		// load, compile the store's configuration on top of it.
		cp.active.Store(a)
		cp.pending.Store(a)
		go cp.settle()
		return nil
	}
	g := a.Generated
	// A compiled config loaded by anyone but the control plane was changed
	// through Caddy's admin API: once this load has finished, the change
	// becomes part of the base (rebase).
	changed := g.Version != cp.loading.Load()
	if !changed && cp.pending.Load() != nil {
		// The control plane's own config, compiled on a base that a load
		// by someone else (`caddy reload`, Caddy's admin API) replaced
		// after the control plane last settled: going live, it would
		// drop that load's sites and apps for good. Caddy keeps the
		// running config; the mutation answers ErrBaseChanged, and the
		// settle that load started compiles on top of it.
		cp.staleBase.Store(true)
		return ErrBaseChanged
	}
	if err := cp.ensureListeners(g.HTTPListen, g.HTTPSListen, g.HTTPS); err != nil {
		return err
	}
	guard.AllowLinkLocal(g.AllowLinkLocal)
	cp.h2c.Store(g.H2C)
	cp.http3.Store(g.HTTP3)
	cp.router.Store(a.Router)
	cp.tlsConfig.Store(a.TLSConfig)
	cp.tlsApp.Store(a.TLSApp)
	cp.health.Sync(g.Health)
	cp.streams.Apply(g.Streams, cp.logger.Named("streams"))
	now := time.Now().UTC()
	cp.applied.Store(g)
	cp.appliedAt.Store(&now)
	cp.active.Store(a)
	if changed {
		cp.pending.Store(a)
		go cp.settle()
	}
	return nil
}

// Deactivate is the gateway app's Stop: nothing when a newer instance took
// over; the previous instance again when a's config failed to start;
// shutdown when the gateway is unloaded for good or the process exits.
func (cp *ControlPlane) Deactivate(a *Instance) {
	a.stopped.Store(true)
	prev := a.prev.Swap(nil)
	if cur := cp.active.Load(); cur != a {
		// a was replaced: the live app no longer needs a as its fallback,
		// and a stopped app must not keep its own predecessors (and their
		// routers) reachable, or every change leaks a configuration.
		if cur != nil {
			cur.prev.CompareAndSwap(a, nil)
		}
		return
	}
	if prev != nil && !prev.stopped.Load() && !caddy.Exiting() {
		cp.active.Store(prev)
		if prev.Generated != nil {
			guard.AllowLinkLocal(prev.Generated.AllowLinkLocal)
			cp.router.Store(prev.Router)
			cp.tlsConfig.Store(prev.TLSConfig)
			cp.tlsApp.Store(prev.TLSApp)
			cp.health.Sync(prev.Generated.Health)
			cp.streams.Apply(prev.Generated.Streams, nil)
			cp.applied.Store(prev.Generated)
		}
		return
	}
	guard.AllowLinkLocal(false)
	cp.shutdown()
}

// Discard is the gateway app's Cleanup: a control plane that never served
// (the first config with the gateway failed to start: its admin port
// taken, say) is shut down and forgotten, so that the next load starts
// from its own bootstrap (admin address, store) instead of inheriting
// this one's until a restart.
func (cp *ControlPlane) Discard() {
	if cp.active.Load() == nil {
		cp.shutdown()
	}
}

// shutdown stops accepting, drains in-flight requests and closes the store.
func (cp *ControlPlane) shutdown() {
	if !cp.isClosed.CompareAndSwap(false, true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cp.lnMu.Lock()
	var wg sync.WaitGroup
	for k, l := range cp.listeners {
		wg.Add(1)
		go func(l *proxyListener) { defer wg.Done(); l.shutdown(ctx) }(l)
		delete(cp.listeners, k)
	}
	cp.guardListenersLocked()
	cp.lnMu.Unlock()
	wg.Add(1)
	go func() { defer wg.Done(); cp.streams.Close(ctx) }()
	wg.Wait()
	if cp.adminSrv != nil {
		// Close, not Shutdown: this may run inside an admin request that
		// is waiting for the config load that stops us.
		_ = cp.adminSrv.Close()
	}
	cp.health.Stop()
	cp.observer.Close()
	cp.stopServices()
	cp.closeProxyPool()
	if err := cp.store.Close(); err != nil {
		cp.logger.Error("closing store", zap.Error(err))
	}
	processMu.Lock()
	if processCP == cp {
		processCP = nil
	}
	processMu.Unlock()
}

// adminMaxHeaderBytes is the most the admin listener reads of a request's
// header section (docs/operations.md); past it the answer is 431.
const adminMaxHeaderBytes = 64 << 10

// startAdmin binds the admin API once for the life of the process.
func (cp *ControlPlane) startAdmin() error {
	cp.lnMu.Lock()
	defer cp.lnMu.Unlock()
	if cp.adminLn != nil {
		return nil
	}
	ln, err := net.Listen("tcp", cp.Boot().AdminListen)
	if err != nil {
		return fmt.Errorf("gateway admin listener: %w", err)
	}
	cp.adminLn = ln
	// Outbound connections to user-supplied addresses must never reach
	// the admin API (package guard).
	guard.Set("the gateway admin API", ln.Addr().String())
	cp.adminSrv = &http.Server{
		Handler: cp.admin,
		// A session cookie, a token and the browser's usual headers fit
		// many times over; Go's default (1 MB) let any client that reaches
		// the listener hold a megabyte per connection before it is
		// authenticated.
		MaxHeaderBytes:    adminMaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          zap.NewStdLog(cp.logger.Named("admin")),
	}
	go func() {
		if err := cp.adminSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cp.logger.Error("admin server stopped", zap.Error(err))
		}
	}()
	cp.logger.Info("gateway admin API listening", zap.String("address", ln.Addr().String()))
	return nil
}

// AdminAddr is the bound admin address.
func (cp *ControlPlane) AdminAddr() string {
	cp.lnMu.Lock()
	defer cp.lnMu.Unlock()
	if cp.adminLn == nil {
		return ""
	}
	return cp.adminLn.Addr().String()
}

// settle catches up with the config loaded last by others than the
// control plane (pending), once that load has finished: from a goroutine
// started by its Activate, or from the next mutation or cluster sync if
// it comes first, so a gateway change made right after `caddy reload` or
// a change through Caddy's admin API never compiles on the base before it.
func (cp *ControlPlane) settle() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	defer cp.readyOnce.Do(func() { close(cp.ready) })
	cp.settleLocked()
}

// settleLocked is settle with cp.mu held.
func (cp *ControlPlane) settleLocked() {
	a := cp.pending.Swap(nil)
	if a == nil || cp.active.Load() != a {
		return // none, or a newer config took over (it settles itself)
	}
	if a.Generated == nil {
		cp.bootstrapLocked(a)
	} else {
		cp.rebaseLocked(a)
	}
}

// bootstrapLocked captures the running config, hand-written, and loads the
// compiled one on top of it. When the running config cannot be read,
// nothing is loaded: a config of the gateway alone would drop the user's
// sites (and switch on Caddy's admin endpoint where the user said `admin
// off`).
func (cp *ControlPlane) bootstrapLocked(a *Instance) {
	cp.reboot(a.Bootstrap)
	base, err := cp.readRunning(a)
	if cp.active.Load() != a {
		return
	}
	cp.base = base
	if err != nil {
		cp.logger.Error("the gateway did not load its configuration: it keeps the rest of the running config in every config it loads, and could not read it from Caddy's admin endpoint; keep Caddy's admin endpoint on (not `admin off`), set the gateway's caddy_admin to its address, then `caddy reload`",
			zap.String("caddy_admin", caddyAdminAddr(a)), zap.Error(err))
		return
	}
	quietLogging(base)
	cp.ensureProxyPool()
	if err := cp.reloadLocked(); err != nil {
		cp.logger.Error("loading the stored gateway configuration", zap.Error(err))
		return
	}
	if cp.onReady != nil {
		cp.onReady()
	}
	cp.startServices()
}

// rebaseLocked takes a change of the running config made through Caddy's
// admin API (POST /load, PATCH /config/…) of a config the control plane
// had compiled (a): the changed config becomes the base of the configs
// compiled from now on, except what the gateway writes into every config
// (compiler.Rebase), whose changes are logged as not kept.
func (cp *ControlPlane) rebaseLocked(a *Instance) {
	if cp.base == nil {
		return
	}
	running, err := cp.readRunning(a)
	if cp.active.Load() != a {
		return
	}
	if err != nil {
		cp.logger.Error("a change made through Caddy's admin API could not be read back: the next gateway change replaces it",
			zap.String("caddy_admin", caddyAdminAddr(a)), zap.Error(err))
		return
	}
	base, kept, err := compiler.Rebase(cp.base, running, cp.loaded)
	if err != nil {
		cp.logger.Error("a change made through Caddy's admin API could not be kept: the next gateway change replaces it", zap.Error(err))
		return
	}
	cp.base = base
	if len(kept) > 0 {
		cp.logger.Warn("a change made through Caddy's admin API to what the gateway writes into every config is replaced at the next gateway change; make it in your Caddyfile (`caddy reload`) instead",
			zap.Strings("changed", kept))
	}
}

// SetReadyHook installs what runs each time the stored configuration has
// been loaded on top of a hand-written one (process start, `caddy reload`):
// the app's startup summary.
func (cp *ControlPlane) SetReadyHook(fn func()) { cp.onReady = fn }

// ErrBaseChanged is a change whose compiled config was refused because
// the running Caddy config was replaced (`caddy reload`, Caddy's admin API)
// while the change was being compiled: the gateway changes nothing then,
// and compiles on the new config as soon as it has loaded.
var ErrBaseChanged = errors.New("the running Caddy config changed (caddy reload, or a change through Caddy's admin API) while this change was being applied: nothing was changed; try again")

// testHookBeforeLoad, when set (SetTestHookBeforeLoad), runs in load just
// before caddy.Load: tests make another load happen there.
var testHookBeforeLoad atomic.Pointer[func()]

// SetTestHookBeforeLoad sets a function load calls just before caddy.Load
// (nil: none). For tests only: it lets a test load another config between
// a change's compile and its load, deterministically.
func SetTestHookBeforeLoad(fn func()) {
	if fn == nil {
		testHookBeforeLoad.Store(nil)
		return
	}
	testHookBeforeLoad.Store(&fn)
}

// ErrNoBase is a compile without the rest of the running config: the
// gateway changes nothing then.
var ErrNoBase = errors.New("the gateway could not read the running config from Caddy's admin endpoint, and does not replace what it cannot read: nothing was changed (keep Caddy's admin endpoint on, set the gateway's caddy_admin to its address, then caddy reload)")

func caddyAdminAddr(a *Instance) string {
	if a.CaddyAdmin != "" {
		return a.CaddyAdmin
	}
	return caddy.DefaultAdminListen
}

// readRunning reads the running config from Caddy's admin API, once the
// load of a's config has finished: GET /config/ waits for a load in
// progress, so it runs after Start, never in Provision or Start. Holding
// cp.mu is fine: no load waits for it (Provision and Start never take it).
func (cp *ControlPlane) readRunning(a *Instance) (map[string]json.RawMessage, error) {
	addr := caddyAdminAddr(a)
	var lastErr error
	for i := 0; i < 50; i++ {
		resp, err := caddycmd.AdminAPIRequest(addr, http.MethodGet, "/config/", nil, nil)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			var base map[string]json.RawMessage
			if rerr == nil && json.Unmarshal(body, &base) == nil && base != nil {
				return base, nil
			}
			lastErr = fmt.Errorf("unexpected /config/ answer: %.200s", body)
		} else {
			lastErr = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, lastErr
}

// WaitReady blocks until the stored configuration has been loaded once.
func (cp *ControlPlane) WaitReady(ctx context.Context) error {
	select {
	case <-cp.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LoadError is a compiled config that Caddy refused: the mutation is rolled
// back and the running config is unchanged.
type LoadError struct{ Err error }

func (e *LoadError) Error() string {
	return "the compiled configuration was rejected: " + e.Err.Error()
}
func (e *LoadError) Unwrap() error { return e.Err }

// Mutate runs fn in a transaction, compiles the configuration as the
// transaction sees it and loads it; the transaction commits only when the
// load succeeded. Mutations are serialized. fn must use tx, never the
// store's own handle (it would wait for the transaction's lock).
func (cp *ControlPlane) Mutate(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if err := cp.WaitReady(ctx); err != nil {
		return fmt.Errorf("gateway not ready: %w", err)
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.settleLocked()
	loaded := false
	err := cp.store.DB.WithContext(context.WithoutCancel(ctx)).Transaction(func(tx *gorm.DB) error {
		// First: the version row's lock serializes mutations of every node
		// sharing the store, so fn reads what the others committed.
		v, err := cp.store.BumpConfigVersion(tx)
		if err != nil {
			return err
		}
		if v != cp.AppliedConfigVersion()+1 {
			// Another node committed since this one last loaded: its
			// route writes were not seen by this store's route cache.
			cp.store.VerifyRoutes()
		}
		if err := fn(tx); err != nil {
			return err
		}
		snap, err := cp.store.LoadSnapshot(tx)
		if err != nil {
			return err
		}
		out, version, err := cp.compile(snap)
		if err != nil {
			return err
		}
		if err := cp.load(out, version); err != nil {
			if errors.Is(err, ErrBaseChanged) {
				return err
			}
			return &LoadError{Err: err}
		}
		loaded = true
		return nil
	})
	if err != nil {
		cp.store.RolledBack()
	}
	if err != nil && loaded {
		// The new config went live but the commit failed: load what the
		// store holds again so traffic and store agree.
		if rerr := cp.reloadLocked(); rerr != nil {
			cp.unstored.Store(true)
			cp.logger.Error("restoring the stored configuration after a failed commit (a cluster node retries at its next check)", zap.Error(rerr))
		}
	}
	return err
}

// reloadLocked compiles and loads the store's configuration (cp.mu held).
// Every route is compared with the database: the store may have been
// written by others.
func (cp *ControlPlane) reloadLocked() error {
	cp.store.VerifyRoutes()
	snap, err := cp.readSnapshot()
	if err != nil {
		return err
	}
	return cp.applyLocked(snap)
}

// applyLocked compiles and loads a snapshot of the store (cp.mu held).
// When that fails, the store is told that the routes it read did not go
// live: the next snapshot reads them again, rather than building on a
// table that lacks them (the routing table is updated from the changed
// rows only).
func (cp *ControlPlane) applyLocked(snap *storage.Snapshot) error {
	out, version, err := cp.compile(snap)
	if err == nil {
		err = cp.load(out, version)
	}
	if err != nil {
		cp.store.RolledBack()
	}
	return err
}

// load loads a compiled config; the values it references (package
// configref) are kept for it when it went live and dropped otherwise.
func (cp *ControlPlane) load(out *compiler.Compiled, version int64) error {
	if hook := testHookBeforeLoad.Load(); hook != nil {
		(*hook)()
	}
	cp.staleBase.Store(false)
	cp.loading.Store(version)
	err := caddy.Load(out.Config, false)
	cp.loading.Store(0)
	if err != nil {
		configref.Drop(version)
		if cp.staleBase.Load() {
			return ErrBaseChanged
		}
		return err
	}
	configref.Retain(version)
	cp.unstored.Store(false)
	cp.loaded = out.Config
	cp.table = out.Table
	cp.liveProxies = out.Proxies
	return nil
}

// TLSApp is the tls app of the live compiled config (nil when the config
// has none).
func (cp *ControlPlane) TLSApp() *caddytls.TLS { return cp.tlsApp.Load() }

// Admin is the admin API handler.
func (cp *ControlPlane) Admin() http.Handler { return cp.admin }
