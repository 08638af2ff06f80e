// Package poll waits in tests for a condition that something running in
// the background makes true (a health check's verdict, a reload's effect).
package poll

import (
	"testing"
	"time"
)

// Timeout bounds Until: generous, so that a loaded machine (the whole
// suite on two cores) does not fail a test that only waits.
const Timeout = 10 * time.Second

// Until returns once cond is true, checking it every 10 ms; after Timeout
// it ends t with "timed out waiting for <what>".
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	until(t, what, Timeout, cond)
}

func until(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
