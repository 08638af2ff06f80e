package tests

import (
	"runtime"
	"strconv"

	"github.com/caddyserver/caddy/v2"
)

func stopGateway() error { return caddy.Stop() }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// heapAfterGC is the heap in use after full collections.
func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
