// Package cputime measures the CPU time the process uses, for benchmarks
// that must compare variants on a machine shared with other work: wall
// time per operation moves with the load, CPU time per operation much less.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Process is the user and system CPU time the process has used so far.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Report runs the benchmark loop body b.N times and reports the process's
// CPU time per operation as cpu-ns/op (garbage collection and every
// goroutine of the process included).
func Report(b *testing.B, body func()) {
	b.Helper()
	b.ResetTimer()
	start := Process()
	for i := 0; i < b.N; i++ {
		body()
	}
	b.StopTimer()
	b.ReportMetric(float64(Process()-start)/float64(b.N), "cpu-ns/op")
}
