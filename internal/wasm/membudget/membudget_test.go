package membudget

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/caddy-gateway/gateway/internal/wasm/wat"
)

const page = 64 << 10

// grower is a module with one page of memory (at most 1024) whose grow
// runs memory.grow and fills the new pages, as a guest allocator would.
const grower = `(module
  (memory (export "memory") 1 1024)
  (func (export "grow") (param $pages i32) (result i32)
    (local $old i32)
    (local.set $old (memory.grow (local.get $pages)))
    (if (i32.ge_s (local.get $old) (i32.const 0))
      (then (memory.fill (i32.mul (local.get $old) (i32.const 65536)) (i32.const 7)
        (i32.mul (local.get $pages) (i32.const 65536)))))
    (local.get $old)))`

// instances starts n instances of grower charged to b, real wazero.
func instances(t *testing.T, b *Budget, n int) []api.Module {
	t.Helper()
	bin, err := wat.Compile([]byte(grower))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(1024))
	t.Cleanup(func() { _ = rt.Close(ctx) })
	compiled, err := rt.CompileModule(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	var mods []api.Module
	for range n {
		m, err := rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, b), compiled, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, m)
	}
	return mods
}

func grow(t *testing.T, m api.Module, pages uint32) int32 {
	t.Helper()
	res, err := m.ExportedFunction("grow").Call(context.Background(), uint64(pages))
	if err != nil {
		t.Fatal(err)
	}
	return int32(res[0])
}

func TestInstancesShareTheBudget(t *testing.T) {
	b := New(4 << 20)
	mods := instances(t, b, 2)
	a, c := mods[0], mods[1]
	if b.Used() != 2*page {
		t.Fatalf("initial memories: %d bytes charged, want %d", b.Used(), 2*page)
	}
	if got := grow(t, a, 40); got != 1 {
		t.Fatalf("a grows within the budget: memory.grow = %d", got)
	}
	// a holds 41 pages (2.6 MiB); 40 more for c do not fit in 4 MiB
	if got := grow(t, c, 40); got != -1 {
		t.Fatalf("c grows beyond the budget: memory.grow = %d, want -1 (used %d)", got, b.Used())
	}
	if c.Memory().Size() != page {
		t.Fatalf("a failed grow changed c's memory to %d bytes", c.Memory().Size())
	}
	if b.Room(2<<20) || !b.Room(1<<20) || b.Pressed() {
		t.Fatalf("used %d of %d: Room(2 MiB) %v, Room(1 MiB) %v, Pressed %v", b.Used(), b.Limit(), b.Room(2<<20), b.Room(1<<20), b.Pressed())
	}
	// a small growth still fits, and the data survives a move
	if got := grow(t, c, 8); got != 1 {
		t.Fatalf("c grows by 8 pages: %d", got)
	}
	if !b.Pressed() {
		t.Fatalf("used %d of %d: not pressed", b.Used(), b.Limit())
	}
	if v, ok := c.Memory().ReadByte(2*page + 5); !ok || v != 7 {
		t.Fatalf("c's grown memory: %d %v", v, ok)
	}
	// closing a gives its memory back
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := grow(t, c, 40); got != 9 {
		t.Fatalf("c grows once a is closed: memory.grow = %d (used %d)", got, b.Used())
	}
	if v, ok := c.Memory().ReadByte(2*page + 5); !ok || v != 7 {
		t.Fatalf("c's memory after moving: %d %v", v, ok)
	}
	_ = c.Close(context.Background())
	if b.Used() != 0 {
		t.Fatalf("%d bytes still charged with every instance closed", b.Used())
	}
}

func TestGrowthLeavesRoomAsAppendDoes(t *testing.T) {
	b := New(1 << 30)
	m := instances(t, b, 1)[0]
	// 64 growths of one page copy the memory a handful of times, not 64
	moves := 0
	prev := b.Used()
	for range 64 {
		grow(t, m, 1)
		if b.Used() != prev {
			moves++
			prev = b.Used()
		}
	}
	if moves > 8 {
		t.Fatalf("the memory was reallocated %d times for 64 one-page growths", moves)
	}
	if m.Memory().Size() != 65*page || b.Used() < 65*page || b.Used() > 2*65*page {
		t.Fatalf("size %d, charged %d", m.Memory().Size(), b.Used())
	}
	// the instance's own cap still holds
	if got := grow(t, m, 1024); got != -1 {
		t.Fatalf("growth past the instance's cap: %d", got)
	}
}

func TestLowerLimitStopsGrowthNotRunningInstances(t *testing.T) {
	b := New(8 << 20)
	m := instances(t, b, 1)[0]
	grow(t, m, 63) // 4 MiB
	b.SetLimit(2 << 20)
	if got := grow(t, m, 1); got != -1 {
		t.Fatalf("growth beyond a lowered limit: %d", got)
	}
	if m.Memory().Size() != 64*page {
		t.Fatalf("the running instance lost memory: %d", m.Memory().Size())
	}
}
