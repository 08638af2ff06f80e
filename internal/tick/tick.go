// Package tick runs the periodic background work of the gateway's
// long-lived goroutines (cluster heartbeats and checks, lock refreshes).
package tick

import (
	"context"
	"time"
)

// Every runs fn every interval and whenever kicked receives (a nil kicked
// never does), until ctx ends.
func Every(ctx context.Context, interval time.Duration, kicked <-chan struct{}, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kicked:
		}
		fn()
	}
}
