// Package modpool provisions Caddy modules once and shares them between
// the configs that use them. Caddy provisions every module of a config in
// that config's context and cleans it up with the config, so a gateway
// change at 5,000 services provisioned 5,000 reverse proxies again (and
// dropped their upstream keep-alive pools). A Pool provisions each module
// in a context of its own, derived from a process-lived context that no
// config owns, and hands the same instance to every config whose JSON for
// it is byte-for-byte the same. Each config holds a Lease per module and
// releases it when Caddy cleans the config up; a module is cleaned up (its
// context cancelled: Caddy's Cleanup of it and of its submodules) when the
// last config using it released it, never while a running config may
// still route requests to it.
//
// A module provisioned in a config's own context would keep that whole
// config reachable for as long as it lives (modules keep their context),
// which is why the pool's context is private.
package modpool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/caddyserver/caddy/v2"
)

// Pool shares provisioned modules by name and config. The zero value is
// not usable: New.
type Pool struct {
	// newParent creates parent, at the first provisioning (New).
	newParent func() (caddy.Context, func(), error)

	mu sync.Mutex
	// parent of every module's context: its values (and Caddy config:
	// logging, apps such as events) are what the modules see; cancelParent
	// ends it (Close).
	parent       caddy.Context
	cancelParent func()
	hasParent    bool
	// entries are the live instances by name: usually one, two while a
	// config with a changed module replaces the running one.
	entries map[string][]*entry
	closed  bool
}

type entry struct {
	name   string
	id     string
	raw    []byte
	module caddy.Module
	refs   int
	cancel func()
}

// New returns a pool provisioning its modules in children of the context
// newParent returns, and calling its cancel function (may be nil) on
// Close. Cancelling a child must not run any cleanup of parent's own:
// derive parent with caddy.NewContext from the context that owns the
// config (Caddy runs a context's parent's cleanup functions when it is
// cancelled).
//
// newParent runs once, in the first Acquire that provisions a module
// (again in the next one if it failed), under the pool's lock. Modules are
// acquired while Caddy provisions a config that uses them, that is inside
// caddy.Load, which holds Caddy's config lock: newParent may create its
// context with caddy.ProvisionContext, which writes state a load writes
// too (certmagic's default storage, Caddy's default logger), without a
// concurrent load interleaving.
func New(newParent func() (caddy.Context, func(), error)) *Pool {
	return &Pool{newParent: newParent, entries: map[string][]*entry{}}
}

// A Lease is one config's use of a pooled module.
type Lease struct {
	pool *Pool
	e    *entry
	once sync.Once
}

// Module is the provisioned module.
func (l *Lease) Module() caddy.Module { return l.e.module }

// Release gives the lease up; the module is cleaned up when no lease holds
// it. Releasing twice is harmless.
func (l *Lease) Release() {
	l.once.Do(func() { l.pool.release(l.e) })
}

// Acquire returns a lease on the module named name (the caller's key, such
// as "service/12") of module id id with config raw: the instance already
// provisioned from the same id and bytes when there is one, else a new one
// provisioned in a context of its own. A failed provisioning leaves
// nothing behind. raw must not be modified afterwards.
func (p *Pool) Acquire(name, id string, raw json.RawMessage) (*Lease, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("module pool is closed")
	}
	for _, e := range p.entries[name] {
		if e.id == id && bytes.Equal(e.raw, raw) {
			e.refs++
			return &Lease{pool: p, e: e}, nil
		}
	}
	if !p.hasParent {
		parent, cancel, err := p.newParent()
		if err != nil {
			return nil, fmt.Errorf("module pool context: %w", err)
		}
		p.parent, p.cancelParent, p.hasParent = parent, cancel, true
	}
	// Provisioned under the lock: Caddy's config (its apps) is not safe
	// for concurrent provisioning, and loads are serialized anyway.
	ctx, cancel := caddy.NewContext(p.parent)
	m, err := ctx.LoadModuleByID(id, raw)
	if err != nil {
		cancel()
		return nil, err
	}
	mod, ok := m.(caddy.Module)
	if !ok {
		cancel()
		return nil, fmt.Errorf("%s is not a module", id)
	}
	// Once: Close and a late Release may both end it.
	e := &entry{name: name, id: id, raw: raw, module: mod, refs: 1, cancel: sync.OnceFunc(cancel)}
	p.entries[name] = append(p.entries[name], e)
	return &Lease{pool: p, e: e}, nil
}

func (p *Pool) release(e *entry) {
	p.mu.Lock()
	e.refs--
	if e.refs > 0 {
		p.mu.Unlock()
		return
	}
	list := p.entries[e.name]
	for i, x := range list {
		if x == e {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.entries, e.name)
	} else {
		p.entries[e.name] = list
	}
	p.mu.Unlock()
	e.cancel() // Caddy's Cleanup of the module and its submodules
}

// Len is the number of live instances (tests, metrics).
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.entries {
		n += len(l)
	}
	return n
}

// Close cleans up every instance, leased or not (process shutdown), then
// the parent context, and refuses new leases.
func (p *Pool) Close() {
	p.mu.Lock()
	var all []*entry
	for _, l := range p.entries {
		all = append(all, l...)
	}
	p.entries, p.closed = map[string][]*entry{}, true
	cancelParent := p.cancelParent
	p.cancelParent = nil
	p.mu.Unlock()
	for _, e := range all {
		e.cancel()
	}
	if cancelParent != nil {
		cancelParent()
	}
}
