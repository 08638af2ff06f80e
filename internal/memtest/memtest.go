// Package memtest measures what code allocates, for the tests that bound
// it (an attacker-sized input must not cost memory in proportion to its
// size). Its test is memtest_test.go.
package memtest

import "runtime"

// Allocated is how many bytes the process allocated while fn ran: the
// runtime's TotalAlloc, every goroutine's allocations, freed or not (a
// server handling fn's request counts too).
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
