package modpool_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/internal/modpool"
)

// probe is a module that counts its provisionings and cleanups and sees
// its context's cancellation.
type probe struct {
	Name string `json:"name"`
	Fail bool   `json:"fail,omitempty"`

	ctx     caddy.Context
	cleaned atomic.Bool
}

var provisioned, cleanedUp atomic.Int64

func (*probe) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "modpool_test.probe", New: func() caddy.Module { return new(probe) }}
}

func (p *probe) Provision(ctx caddy.Context) error {
	if p.Fail {
		return errors.New("refused")
	}
	p.ctx = ctx
	provisioned.Add(1)
	return nil
}

func (p *probe) Cleanup() error {
	p.cleaned.Store(true)
	cleanedUp.Add(1)
	return nil
}

func init() { caddy.RegisterModule(new(probe)) }

func newPool(t *testing.T) *modpool.Pool {
	t.Helper()
	parent, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	p := modpool.New(func() (caddy.Context, func(), error) { return parent, nil, nil })
	t.Cleanup(p.Close)
	return p
}

func acquire(t *testing.T, p *modpool.Pool, name, raw string) (*modpool.Lease, *probe) {
	t.Helper()
	l, err := p.Acquire(name, "modpool_test.probe", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return l, l.Module().(*probe)
}

// A config that uses the same bytes for a name shares the instance; other
// bytes get a new one; an instance is cleaned up (its context cancelled)
// when its last lease is released, not before.
func TestShareAndCleanup(t *testing.T) {
	p := newPool(t)
	// Config 1 uses a and b.
	a1, pa := acquire(t, p, "svc/1", `{"name":"a"}`)
	b1, pb := acquire(t, p, "svc/2", `{"name":"b"}`)
	// Config 2: a unchanged, b changed.
	a2, pa2 := acquire(t, p, "svc/1", `{"name":"a"}`)
	b2, pb2 := acquire(t, p, "svc/2", `{"name":"b2"}`)
	if pa2 != pa {
		t.Fatal("unchanged module provisioned again")
	}
	if pb2 == pb {
		t.Fatal("changed module shared")
	}
	if n := p.Len(); n != 3 {
		t.Fatalf("%d live instances, want 3", n)
	}
	// Config 1 is cleaned up.
	a1.Release()
	b1.Release()
	b1.Release() // twice: harmless
	if pa.cleaned.Load() || pa.ctx.Err() != nil {
		t.Fatal("a module still used by config 2 was cleaned up")
	}
	if !pb.cleaned.Load() || pb.ctx.Err() == nil {
		t.Fatal("the replaced module was not cleaned up once unused")
	}
	if n := p.Len(); n != 2 {
		t.Fatalf("%d live instances, want 2", n)
	}
	// A removed name: cleaned up with its last config.
	b2.Release()
	if !pb2.cleaned.Load() {
		t.Fatal("a module no config uses any more was not cleaned up")
	}
	a2.Release()
	if p.Len() != 0 {
		t.Fatalf("%d instances left", p.Len())
	}
}

// A config that fails to load leaves the pool as it was: its new modules
// are cleaned up when it releases them, and the running config's modules
// are still shared by the next config.
func TestFailedConfigDoesNotPoison(t *testing.T) {
	p := newPool(t)
	live, orig := acquire(t, p, "svc/1", `{"name":"a"}`)
	defer live.Release()

	// The failed config had changed svc/1, and a module that fails.
	bad, changed := acquire(t, p, "svc/1", `{"name":"a2"}`)
	if _, err := p.Acquire("svc/2", "modpool_test.probe", json.RawMessage(`{"fail":true}`)); err == nil {
		t.Fatal("a module whose provisioning fails was leased")
	}
	bad.Release()
	if !changed.cleaned.Load() {
		t.Fatal("the failed config's module was not cleaned up")
	}

	next, got := acquire(t, p, "svc/1", `{"name":"a"}`)
	defer next.Release()
	if got != orig {
		t.Fatal("after a failed config, the running module is not shared any more")
	}
	if p.Len() != 1 {
		t.Fatalf("%d live instances, want 1", p.Len())
	}
}

// Close cleans up every instance; late releases do not clean up twice.
func TestClose(t *testing.T) {
	p := newPool(t)
	l, m := acquire(t, p, "svc/1", `{"name":"a"}`)
	before := cleanedUp.Load()
	p.Close()
	if !m.cleaned.Load() {
		t.Fatal("Close left a module")
	}
	l.Release()
	if d := cleanedUp.Load() - before; d != 1 {
		t.Fatalf("%d cleanups, want 1", d)
	}
	if _, err := p.Acquire("svc/1", "modpool_test.probe", json.RawMessage(`{}`)); err == nil {
		t.Fatal("a closed pool leased a module")
	}
}

// The parent context is created by the first Acquire that provisions (in
// the load that uses the module, not when the pool is made), again after
// a failure, once otherwise, and cancelled by Close.
func TestParentCreatedAtFirstProvisioning(t *testing.T) {
	var made, cancelled int
	fail := true
	p := modpool.New(func() (caddy.Context, func(), error) {
		if fail {
			return caddy.Context{}, nil, errors.New("no context")
		}
		made++
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		return ctx, func() { cancelled++; cancel() }, nil
	})
	if made != 0 {
		t.Fatal("parent created before any module was acquired")
	}
	if _, err := p.Acquire("svc/1", "modpool_test.probe", json.RawMessage(`{"name":"a"}`)); err == nil {
		t.Fatal("a module was leased without its parent context")
	}
	fail = false
	a, _ := acquire(t, p, "svc/1", `{"name":"a"}`)
	b, _ := acquire(t, p, "svc/2", `{"name":"b"}`)
	if made != 1 {
		t.Fatalf("parent created %d times, want 1", made)
	}
	a.Release()
	b.Release()
	if cancelled != 0 {
		t.Fatal("parent cancelled before Close")
	}
	p.Close()
	p.Close()
	if cancelled != 1 {
		t.Fatalf("parent cancelled %d times by Close, want 1", cancelled)
	}
}
