package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm"
)

// TestWasmTickAndLogFloodIsBounded: a module that asks for a tick every
// millisecond and logs 16 × 16 KiB a tick, attached to a route, writes to
// the gateway's log at most its budget a second (entries cut at
// MaxLogLine), one summary line a second says how many entries were
// dropped, its ticks come at most every MinTickPeriod, and routes keep
// serving meanwhile. Counts of lines and bytes, no timings.
func TestWasmTickAndLogFloodIsBounded(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gateway.log")
	g := testgw.Start(t, &testgw.Options{LogFile: file})
	svc := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	g.Route("other", svc, testgw.Paths("/other"))
	uploadModule(t, g, map[string]any{"name": "flood", "wat": watFile(t, "flood.wat")})

	start := time.Now()
	_, pid := wasmRoute(t, g, svc, "/flood", "flood", nil)
	served := 0
	for i := 0; i < 40; i++ {
		for _, path := range []string{"/other", "/flood"} {
			if p := send(t, g, "GET", path, nil); p.Status != 200 {
				t.Fatalf("GET %s while the module floods: %d %s", path, p.Status, p.Body)
			}
			served++
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.Must("DELETE", "/api/v1/plugins/"+itoa(pid), nil) // the ticks stop
	elapsed := time.Since(start)
	time.Sleep(1500 * time.Millisecond) // the last second's summary
	if served != 80 {
		t.Fatalf("served %d of 80 requests", served)
	}

	// Seconds the module may have logged in (whole seconds touched).
	seconds := int(elapsed/time.Second) + 2
	var entries, bytes, summaries int
	var dropped float64
	var uncut string // an entry over MaxLogLine, or not saying it was cut
	for _, l := range logLines(t, file) {
		logger, _ := l["logger"].(string)
		if !strings.Contains(logger, "gateway_wasm") {
			continue
		}
		msg, _ := l["msg"].(string)
		switch {
		case strings.Trim(msg, "x") == "":
			entries++
			bytes += len(msg)
			if len(msg) > proxywasm.MaxLogLine || l["cut"] != true || l["message_bytes"] != float64(16384) {
				uncut = fmt.Sprintf("an entry of %d bytes, cut %v, message_bytes %v", len(msg), l["cut"], l["message_bytes"])
			}
		case strings.Contains(msg, "log entries dropped"):
			summaries++
			n, _ := l["dropped_entries"].(float64)
			dropped += n
		}
	}
	t.Logf("%v: %d entries (%d bytes) logged, %d summaries, %v entries dropped", elapsed, entries, bytes, summaries, dropped)
	if entries == 0 {
		t.Fatal("the module's entries never reached the log")
	}
	if entries > seconds*proxywasm.LogLinesPerSecond || bytes > seconds*proxywasm.LogBytesPerSecond {
		t.Errorf("%d entries, %d bytes in at most %d seconds: over the log budget", entries, bytes, seconds)
	}
	if uncut != "" {
		t.Errorf("%s, want entries cut at %d bytes", uncut, proxywasm.MaxLogLine)
	}
	if summaries == 0 || summaries > seconds || dropped == 0 {
		t.Fatalf("%d summary lines (%v entries dropped) in at most %d seconds: want one a second with drops", summaries, dropped, seconds)
	}
	// 16 entries a tick: the ticks the module had, at most one every
	// MinTickPeriod.
	ticks := (entries + int(dropped)) / 16
	if most := int(elapsed/proxywasm.MinTickPeriod) + 2; ticks > most {
		t.Fatalf("%d ticks in %v: more than one every %v", ticks, elapsed, proxywasm.MinTickPeriod)
	}
}
