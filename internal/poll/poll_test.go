package poll

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTrue(t *testing.T) {
	var n atomic.Int32
	go func() {
		time.Sleep(30 * time.Millisecond)
		n.Store(1)
	}()
	Until(t, "the flag", func() bool { return n.Load() == 1 })
	calls := 0
	Until(t, "an immediate condition", func() bool { calls++; return true })
	if calls != 1 {
		t.Fatalf("cond called %d times for a condition true at once", calls)
	}
}

// fatalT records what Until does to a test whose condition never holds.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = format
	if len(args) > 0 {
		f.msg = args[0].(string)
	}
	panic(f)
}

func TestUntilTimesOut(t *testing.T) {
	f := &fatalT{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("Until did not end the test (recovered %v)", r)
			}
		}()
		until(f, "never", 50*time.Millisecond, func() bool { return false })
	}()
	if f.msg != "never" {
		t.Fatalf("message names %q, want never", f.msg)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", waited)
	}
}
