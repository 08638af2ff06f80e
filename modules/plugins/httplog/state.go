package httplog

import (
	"context"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/modules/plugins/httplog/logsender"
)

// senders holds the plugin's senders (queue and background delivery
// goroutine per plugin instance). They must outlive config reloads: every
// admin API mutation loads a fresh config, and a sender that started over
// on each reload would lose its queued records and its retry state. The
// registry counts the instances that hold a sender (Provision acquires,
// Cleanup releases); a sender whose plugin is gone from the config for the
// grace period flushes and stops.
var senders = logsender.NewRegistry(logsender.DefaultGrace)

func init() {
	// On process exit, deliver what is queued (bounded wait).
	caddy.OnExit(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		senders.Shutdown(ctx)
	})
}
