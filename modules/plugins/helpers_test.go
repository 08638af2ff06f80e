package plugins

import (
	"strings"
	"testing"
)

func TestInstanceKey(t *testing.T) {
	type cfg struct{ Limit int }
	if got := InstanceKey(42, cfg{1}); got != "id:42" {
		t.Errorf("with id: %q", got)
	}
	a, b, c := InstanceKey(0, cfg{1}), InstanceKey(0, cfg{1}), InstanceKey(0, cfg{2})
	if !strings.HasPrefix(a, "cfg:") || a != b || a == c {
		t.Errorf("standalone keys %q %q %q: want equal for equal settings only", a, b, c)
	}
}

// A prefix's state is dropped when its last holder releases it, not before
// (a reload holds the new instance before releasing the old one).
func TestHolders(t *testing.T) {
	var dropped []string
	h := NewHolders(func(prefix string) int { dropped = append(dropped, prefix); return 1 })
	a := h.Hold("a:")
	reloaded := h.Hold("a:")
	b := h.Hold("b:")
	// a cleaned up twice; never: an instance that never held anything
	var never Held
	for _, c := range []*Held{&a, &a, &never} {
		if err := c.Cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	if len(dropped) != 0 {
		t.Fatalf("dropped %q while held", dropped)
	}
	_ = reloaded.Cleanup()
	_ = b.Cleanup()
	if len(dropped) != 2 || dropped[0] != "a:" || dropped[1] != "b:" {
		t.Fatalf("dropped %q, want [a: b:]", dropped)
	}
}
