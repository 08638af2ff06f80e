// Package process holds the only state of the gateway's modules that must
// outlive a Caddy config reload. Every mutation loads a fresh config, so
// anything kept on a module instance starts over on each change; what must
// not (target health, rate-limit counters, cached responses, queued log
// records) lives here, one instance per process, each in its own file.
package process

import "github.com/caddy-gateway/gateway/modules/health"

// Health is the process-wide health-check registry: target state must survive
// reloads, or a request right after a mutation would go to a dead target.
var Health = health.NewRegistry(0)
