package controlplane

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	"github.com/caddy-gateway/gateway/internal/health"
	"github.com/caddy-gateway/gateway/internal/modpool"
)

// The service proxies are provisioned once per distinct compiled config
// and shared by every loaded config that uses them (package modpool,
// router.PooledProxies): a change at 5,000 services provisions only the
// changed services' proxies, and unchanged ones keep their upstream
// keep-alive pools, passive health counts and streams. They live in a
// private Caddy config that the control plane creates once: a proxy
// provisioned in a loaded config's context would keep that whole config
// reachable for as long as the proxy lives.

// ensureProxyPool creates the proxy pool once (cp.mu held, before the
// first load of a compiled config). Its private config is provisioned
// later, by the first load that leases a proxy (newProxyContext), with
// the logging of the base captured now: the one place that decides the
// proxies' logging (what reverse_proxy's own logger writes to) is that
// it is the running config's (the user's log settings apply to proxied
// requests as they did when each config provisioned its own proxies).
func (cp *ControlPlane) ensureProxyPool() {
	if cp.proxies != nil {
		return
	}
	logging := slices.Clone(cp.base["logging"])
	cp.proxies = modpool.New(func() (caddy.Context, func(), error) {
		return cp.newProxyContext(logging)
	})
}

// newProxyContext provisions the private config of the shared proxies
// and returns the context their own contexts derive from. The pool calls
// it inside the caddy.Load of the first config that leases a proxy
// (modpool.New): caddy.ProvisionContext writes process-wide state a load
// writes too, and only inside a load does no other load interleave.
//
//   - certmagic's default storage: Caddy makes every provisioned config's
//     storage the default; the private config has none of its own, so the
//     loading config's (such as the cluster's shared storage) is put back.
//   - Caddy's default logger: ProvisionContext makes the private config's
//     default log Caddy's default logger, and Caddy offers no way back.
//     It is built from the logging config the loading config was compiled
//     with (the captured base's), so the default log stays configured as
//     the user asked, and the next load replaces it with its own.
func (cp *ControlPlane) newProxyContext(logging json.RawMessage) (caddy.Context, func(), error) {
	lg := new(caddy.Logging)
	if len(logging) > 0 {
		if err := json.Unmarshal(logging, lg); err != nil {
			return caddy.Context{}, nil, fmt.Errorf("reading the logging config: %w", err)
		}
	}
	storage := certmagic.Default.Storage
	root, err := caddy.ProvisionContext(&caddy.Config{
		Logging: lg,
		// reverse_proxy asks for the events app; provisioned here once,
		// not in the context of the first proxy that asks.
		AppsRaw: caddy.ModuleMap{"events": json.RawMessage(`{}`)},
	})
	certmagic.Default.Storage = storage
	if err != nil {
		return caddy.Context{}, nil, fmt.Errorf("the service proxies' context: %w", err)
	}
	// A child of root: cancelling a proxy's context runs its parent's
	// cleanup functions (root's closes the logs), so the proxies descend
	// from base, which the pool cancels when it is closed (shutdown).
	base, cancel := caddy.NewContext(root)
	return health.WithRegistry(base, cp.health), cancel, nil
}

// closeProxyPool cleans up every shared proxy and their context
// (shutdown).
func (cp *ControlPlane) closeProxyPool() {
	if cp.proxies != nil {
		cp.proxies.Close()
	}
}

// ProxyPool is the pool of shared service proxies (nil before the first
// compiled config).
func (cp *ControlPlane) ProxyPool() *modpool.Pool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.proxies
}
