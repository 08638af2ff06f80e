// Package process holds the gateway's state that must outlive a Caddy config
// reload and is shared by the control plane and the modules of every
// config: target health (the checks the control plane runs, the picks of
// the load-balancing policy) and the TCP stream listeners. The plugins keep
// their own such state beside their code (rate-limit counters, cached
// responses, log senders; each package's state.go), held by the instances
// that use it as in a usage pool.
package process

import "github.com/caddy-gateway/gateway/modules/health"

// Health is the process-wide health-check registry: target state must survive
// reloads, or a request right after a mutation would go to a dead target.
var Health = health.NewRegistry(0)
