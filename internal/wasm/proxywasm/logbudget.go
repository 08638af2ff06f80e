package proxywasm

import (
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"
)

// What a module may do outside its requests' own work: write to the
// gateway's log, and tick. A module attached to a route runs for every
// request and on its own timer; without these bounds one that ticks every
// millisecond and logs 16 × 16 KiB a tick grows the gateway's log by
// hundreds of MB a minute, and its ticks take CPU from every route.
const (
	// MaxLogLine caps one log entry's message (proxy_log, one line of
	// stdout or stderr, an AssemblyScript trace): longer ones are cut,
	// and the entry says how long the message was.
	MaxLogLine = 4 << 10
	// LogLinesPerSecond and LogBytesPerSecond are a module's log budget:
	// what all plugins of one VM id (the gateway's module name) may log
	// in one second, from request callbacks and ticks alike. Beyond it,
	// entries are dropped, and one warning per second says how many.
	LogLinesPerSecond = 100
	LogBytesPerSecond = 64 << 10
	// MinTickPeriod is the shortest tick period: a module asking for a
	// shorter one (proxy_set_tick_period_milliseconds) ticks at it.
	MinTickPeriod = 100 * time.Millisecond
	// tickRest is how many times as long as its last tick ran a plugin
	// waits at least before the next one: its ticks take at most a tenth
	// of a CPU however long they run.
	tickRest = 9
)

// tickSlots bounds the ticks running at once in the process, whatever
// the number of plugins: a quarter of the CPUs, at least one. A tick
// waits for a slot; requests never do.
var tickSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/4))

// logBudget is a module's log budget (LogLinesPerSecond,
// LogBytesPerSecond) over the current second, and what was dropped since
// the last summary.
type logBudget struct {
	mu             sync.Mutex
	second         int64 // the Unix second lines and bytes count in
	lines, bytes   int
	dropped        int64 // entries dropped since the last summary
	droppedBytes   int64
	summaryPending bool
}

// take spends one entry of n bytes, or counts it as dropped (false). The
// first drop of a second schedules the summary logger writes when the
// second is over.
func (b *logBudget) take(n int, logger *zap.Logger) bool {
	now := time.Now()
	sec := now.Unix()
	b.mu.Lock()
	defer b.mu.Unlock()
	if sec != b.second {
		b.second, b.lines, b.bytes = sec, 0, 0
	}
	if b.lines < LogLinesPerSecond && b.bytes+n <= LogBytesPerSecond {
		b.lines++
		b.bytes += n
		return true
	}
	b.dropped++
	b.droppedBytes += int64(n)
	if !b.summaryPending {
		b.summaryPending = true
		time.AfterFunc(time.Unix(sec+1, 0).Sub(now), func() { b.summarize(logger) })
	}
	return false
}

// summarize writes the one line that says what was dropped.
func (b *logBudget) summarize(logger *zap.Logger) {
	b.mu.Lock()
	n, bytes := b.dropped, b.droppedBytes
	b.dropped, b.droppedBytes, b.summaryPending = 0, 0, false
	b.mu.Unlock()
	if n == 0 {
		return
	}
	logger.Warn("wasm module log entries dropped: over the module's log budget",
		zap.Int64("dropped_entries", n), zap.Int64("dropped_bytes", bytes),
		zap.Int("budget_entries_per_second", LogLinesPerSecond), zap.Int("budget_bytes_per_second", LogBytesPerSecond))
}

// spendLog takes an entry of n bytes from the module's log budget; false
// when it is dropped.
func (in *Instance) spendLog(n int) bool {
	return in.plugin.shared.logs.take(n, in.plugin.cfg.Logger)
}

// cutLogLine caps a log message at MaxLogLine, returning the fields that
// say it was cut (none when it was not).
func cutLogLine(msg []byte) ([]byte, []zap.Field) {
	if len(msg) <= MaxLogLine {
		return msg, nil
	}
	return msg[:MaxLogLine], []zap.Field{zap.Int("message_bytes", len(msg)), zap.Bool("cut", true)}
}
