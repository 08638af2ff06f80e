package controlplane

import (
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	"github.com/caddy-gateway/gateway/modules/health"
	"github.com/caddy-gateway/gateway/modules/modpool"
)

// The service proxies are provisioned once per distinct compiled config
// and shared by every loaded config that uses them (package modpool,
// router.PooledProxies): a change at 5,000 services provisions only the
// changed services' proxies, and unchanged ones keep their upstream
// keep-alive pools, passive health counts and streams. They live in a
// private Caddy config that the control plane creates once, before its
// first load: a proxy provisioned in a loaded config's context would keep
// that whole config reachable for as long as the proxy lives.

// proxyLogging is the logging of the private config the shared proxies
// are provisioned in (what reverse_proxy's own logger writes to). It is
// the one place that decides it: by default the running config's
// logging (the user's log settings apply to proxied requests as they did
// when each config provisioned its own proxies).
func proxyLogging(base map[string]json.RawMessage) (*caddy.Logging, error) {
	lg := new(caddy.Logging)
	if raw, ok := base["logging"]; ok && len(raw) > 0 {
		if err := json.Unmarshal(raw, lg); err != nil {
			return nil, fmt.Errorf("reading the logging config: %w", err)
		}
	}
	return lg, nil
}

// ensureProxyPool creates the proxy pool's private config once (cp.mu
// held, before the first load of a compiled config).
func (cp *ControlPlane) ensureProxyPool() error {
	if cp.proxies != nil {
		return nil
	}
	lg, err := proxyLogging(cp.base)
	if err != nil {
		return err
	}
	// Caddy makes every provisioned config's storage certmagic's default
	// storage; the private config has none of its own, so the running
	// config's (such as the cluster's shared storage) stays the default.
	storage := certmagic.Default.Storage
	root, err := caddy.ProvisionContext(&caddy.Config{
		Logging: lg,
		// reverse_proxy asks for the events app; provisioned here once,
		// not in the context of the first proxy that asks.
		AppsRaw: caddy.ModuleMap{"events": json.RawMessage(`{}`)},
	})
	certmagic.Default.Storage = storage
	if err != nil {
		return fmt.Errorf("the service proxies' context: %w", err)
	}
	// A child of root: cancelling a proxy's context runs its parent's
	// cleanup functions (root's closes the logs), so the proxies descend
	// from base, which the control plane cancels at shutdown only.
	base, cancel := caddy.NewContext(root)
	cp.proxies = modpool.New(health.WithRegistry(base, cp.health))
	cp.proxiesCancel = cancel
	return nil
}

// closeProxyPool cleans up every shared proxy (shutdown).
func (cp *ControlPlane) closeProxyPool() {
	if cp.proxies != nil {
		cp.proxies.Close()
		cp.proxiesCancel()
	}
}

// ProxyPool is the pool of shared service proxies (nil before the first
// compiled config).
func (cp *ControlPlane) ProxyPool() *modpool.Pool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.proxies
}
