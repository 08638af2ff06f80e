package controlplane

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// The control plane of this process. It is the only state of this package
// that outlives a config reload: every mutation loads a new config and with
// it a new gateway app, and each new app attaches to the same control plane (store,
// admin server, proxy listeners), created by the first one.
var (
	processMu sync.Mutex
	processCP *ControlPlane
)

// For returns the process's control plane, creating it from boot on the
// first load; setup then gives the new control plane its features (the
// admin API handler, the request observer) before anything is served.
func For(boot Bootstrap, logger *zap.Logger, setup func(cp *ControlPlane) error) (*ControlPlane, error) {
	processMu.Lock()
	defer processMu.Unlock()
	applyWASMMemoryLimit(boot)
	if processCP != nil && !processCP.closed() {
		return processCP, nil
	}
	cp, err := newControlPlane(boot, logger)
	if err != nil {
		return nil, err
	}
	if setup != nil {
		if err := setup(cp); err != nil {
			cp.store.Close()
			return nil, err
		}
	}
	processCP = cp
	return cp, nil
}

// WaitReady waits until this process's gateway has loaded its stored
// configuration once (for tests and programs embedding the gateway).
func WaitReady(ctx context.Context) error {
	for {
		processMu.Lock()
		cp := processCP
		processMu.Unlock()
		if cp != nil {
			return cp.WaitReady(ctx)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Current returns this process's control plane (nil when none runs).
func Current() *ControlPlane {
	processMu.Lock()
	defer processMu.Unlock()
	return processCP
}
