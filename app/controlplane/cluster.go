package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/modules/pgstorage"
	"github.com/caddy-gateway/gateway/storage"
)

// Hooks of cluster mode (package app/cluster): several gateway nodes on
// one PostgreSQL store. A mutation increments the stored configuration
// version in its transaction (which notifies the other nodes on
// PostgreSQL); a node that learns of a newer version reloads the store's
// configuration through the same compile and load path (SyncFromStore),
// without incrementing or notifying anything itself.

// Service is work that lives as long as the control plane (cluster
// membership, change listener): started once the stored configuration has
// been loaded the first time, stopped by the returned function before the
// store closes.
type Service func(cp *ControlPlane) (stop func())

type servicesState struct {
	once  sync.Once
	mu    sync.Mutex
	list  []Service
	stops []func()
}

// AddService adds a service to a new control plane (before its first
// load).
func (cp *ControlPlane) AddService(s Service) {
	cp.services.mu.Lock()
	defer cp.services.mu.Unlock()
	cp.services.list = append(cp.services.list, s)
}

func (cp *ControlPlane) startServices() {
	cp.services.once.Do(func() {
		cp.services.mu.Lock()
		defer cp.services.mu.Unlock()
		for _, s := range cp.services.list {
			if stop := s(cp); stop != nil {
				cp.services.stops = append(cp.services.stops, stop)
			}
		}
	})
}

func (cp *ControlPlane) stopServices() {
	cp.services.once.Do(func() {}) // none may start after this
	cp.services.mu.Lock()
	stops := cp.services.stops
	cp.services.stops = nil
	cp.services.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
}

// NodeID names this node in a cluster (GET /api/v1/cluster, the node label
// of the Prometheus metrics): hostname/admin address, stable across
// restarts of the node.
func (cp *ControlPlane) NodeID() string {
	host, _ := os.Hostname()
	return host + "/" + cp.AdminAddr()
}

// AppliedConfigVersion is the stored configuration version of the live
// config (0 before the first load).
func (cp *ControlPlane) AppliedConfigVersion() int64 {
	if g := cp.applied.Load(); g != nil {
		return g.ConfigVersion
	}
	return 0
}

// ProxyAddresses are the addresses this node's proxy listeners serve ("" for
// one that is not bound).
func (cp *ControlPlane) ProxyAddresses() (httpAddr, httpsAddr string) {
	g := cp.applied.Load()
	if g == nil {
		return "", ""
	}
	httpAddr = g.HTTPListen
	if g.HTTPS {
		httpsAddr = g.HTTPSListen
	}
	return httpAddr, httpsAddr
}

// SyncFromStore loads the store's configuration when its version differs
// from the live one (a change committed by another node), or when the live
// one never committed (unstored), and reports whether it did. It does not increment the version: applying a remote
// change notifies nobody.
func (cp *ControlPlane) SyncFromStore(ctx context.Context) (bool, error) {
	if cp.closed() {
		return false, nil
	}
	select {
	case <-cp.ready:
	default:
		return false, nil // the first load will read the store anyway
	}
	stored, err := storage.ConfigVersion(cp.store.DB.WithContext(ctx))
	if err != nil {
		return false, err
	}
	if stored == cp.AppliedConfigVersion() && !cp.unstored.Load() {
		return false, nil
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.closed() {
		return false, nil
	}
	if stored, err = storage.ConfigVersion(cp.store.DB.WithContext(ctx)); err != nil {
		return false, err
	}
	if stored == cp.AppliedConfigVersion() && !cp.unstored.Load() {
		return false, nil // a mutation of this node got there first
	}
	cp.settleLocked()
	failed := &cp.syncFailed
	if failed.version == stored && time.Now().Before(failed.retryAt) {
		return false, nil
	}
	cp.store.VerifyRoutes()
	snap, err := cp.readSnapshot()
	if err != nil {
		return false, err
	}
	if err := cp.applyLocked(snap); err != nil {
		if failed.version != stored {
			*failed = failedSync{version: stored}
		}
		failed.retryAt = time.Now().Add(min(syncRetryFirst<<failed.attempts, syncRetryMax))
		failed.attempts = min(failed.attempts+1, 16)
		return false, &SyncError{Version: stored, Err: err}
	}
	*failed = failedSync{}
	return true, nil
}

// SyncError is a stored configuration this node could not compile or load:
// the store answered, but what another node committed does not run here
// (during a rolling upgrade, a newer node may store what an older one
// cannot load). The node keeps serving its configuration and tries the
// same version again after syncRetryFirst, doubling up to syncRetryMax
// (each try compiles the whole configuration); a newer version is tried at
// once.
type SyncError struct {
	Version int64 // the stored version that failed
	Err     error
}

func (e *SyncError) Error() string {
	return fmt.Sprintf("the stored configuration version %d does not load on this node: %v", e.Version, e.Err)
}

func (e *SyncError) Unwrap() error { return e.Err }

const (
	syncRetryFirst = 5 * time.Second
	syncRetryMax   = 5 * time.Minute
)

// failedSync is the stored version that last failed to load and when it
// may be tried again (cp.mu held).
type failedSync struct {
	version  int64
	attempts int
	retryAt  time.Time
}

// readSnapshot reads the store's configuration. On PostgreSQL it is one
// consistent read (Store.ConsistentRead): another node may commit between
// the queries.
func (cp *ControlPlane) readSnapshot() (*storage.Snapshot, error) {
	if cp.store.Kind != "postgres" {
		return cp.store.LoadSnapshot(cp.store.DB)
	}
	var snap *storage.Snapshot
	err := cp.store.ConsistentRead(context.Background(), func(tx *gorm.DB) error {
		var err error
		snap, err = cp.store.LoadSnapshot(tx)
		return err
	})
	return snap, err
}

// compileStorage makes Caddy keep certificates and ACME state in the
// PostgreSQL store (module caddy.storage.gateway_postgres), so the nodes
// of a cluster obtain each certificate once, share it, and answer each
// other's ACME challenges.
func (cp *ControlPlane) compileStorage() (json.RawMessage, error) {
	if cp.store.Kind != "postgres" {
		return nil, nil
	}
	db, err := cp.store.DB.DB()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pgstorage.Use(ctx, db); err != nil {
		return nil, err
	}
	return json.RawMessage(`{"module":"gateway_postgres"}`), nil
}

// StoreUnreachable reports whether the store fails to answer a ping: a
// request that failed meanwhile is answered 503 rather than 500 (a mutation
// changed nothing: its transaction did not commit).
func (cp *ControlPlane) StoreUnreachable(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	return cp.store.Ping(pctx) != nil
}
