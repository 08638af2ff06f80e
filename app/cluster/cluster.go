// Package cluster runs a gateway node as a member of a cluster: several
// gateway processes on one PostgreSQL store (docs in the README, "Cluster
// mode"). Each node registers itself and reports a heartbeat (GET
// /api/v1/cluster lists the nodes), listens for the configuration changes
// other nodes commit (PostgreSQL LISTEN/NOTIFY on a dedicated connection)
// and checks the stored configuration version every few seconds, which
// catches whatever a dropped connection missed. On SQLite the one node
// registers itself and nothing else runs.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"go.uber.org/zap"
	"gorm.io/gorm/clause"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/internal/tick"
	"github.com/caddy-gateway/gateway/storage"
)

const (
	// CheckInterval is how often a node compares the stored configuration
	// version with the one it serves (the safety net under LISTEN/NOTIFY).
	CheckInterval = 3 * time.Second
	// HeartbeatInterval is how often a node reports itself.
	HeartbeatInterval = 5 * time.Second
	// StaleAfter: a node that has not reported for this long is marked
	// stale (stopped, partitioned from the store, or hung).
	StaleAfter = 3 * HeartbeatInterval
	// forgetAfter: rows of nodes gone this long are deleted.
	forgetAfter = 24 * time.Hour
	// listenPing: how long the listening connection may stay silent
	// before it is checked (a half-open connection raises no error).
	listenPing = 15 * time.Second
)

// node is this process's membership.
type node struct {
	cp      *controlplane.ControlPlane
	logger  *zap.Logger
	id      string
	started time.Time
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	sync      chan struct{} // coalesced requests to compare versions
	heartbeat chan struct{}

	mu      sync.Mutex
	healthy bool // the last store access worked (log state changes only)
}

var (
	nodesMu sync.Mutex
	current = map[*controlplane.ControlPlane]*node{}
)

// Start makes cp a member of the cluster (a controlplane.Service): its
// row, heartbeat and, on PostgreSQL, the change listener and the periodic
// check. The returned function stops them and removes the row.
func Start(cp *controlplane.ControlPlane) func() {
	n := &node{
		cp:        cp,
		logger:    cp.Logger().Named("cluster"),
		id:        cp.NodeID(),
		started:   time.Now().UTC().Truncate(time.Microsecond),
		sync:      make(chan struct{}, 1),
		heartbeat: make(chan struct{}, 1),
		healthy:   true,
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	nodesMu.Lock()
	current[cp] = n
	nodesMu.Unlock()
	n.report(ctx)
	n.wg.Add(1)
	go n.heartbeats(ctx)
	if cp.Store().Kind == "postgres" {
		n.wg.Add(2)
		go n.syncer(ctx)
		go n.listen(ctx)
	}
	return func() {
		cancel()
		n.wg.Wait()
		// A node that stops cleanly leaves the list; one that crashes
		// stays, marked stale.
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer dcancel()
		_ = cp.Store().DB.WithContext(dctx).Delete(&storage.ClusterNode{ID: n.id}).Error
		nodesMu.Lock()
		delete(current, cp)
		nodesMu.Unlock()
	}
}

func nodeOf(cp *controlplane.ControlPlane) *node {
	nodesMu.Lock()
	defer nodesMu.Unlock()
	return current[cp]
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// storeState logs when the store becomes unreachable and when it is back,
// not at every failed attempt.
func (n *node) storeState(what string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case err != nil && n.healthy:
		n.healthy = false
		n.logger.Warn("the store is unreachable; serving the last configuration", zap.String("during", what), zap.Error(err))
	case err == nil && !n.healthy:
		n.healthy = true
		n.logger.Info("the store is reachable again")
	}
}

// report writes this node's row.
func (n *node) report(ctx context.Context) {
	httpAddr, httpsAddr := n.cp.ProxyAddresses()
	host, _ := os.Hostname()
	row := storage.ClusterNode{
		ID: n.id, Hostname: host, AdminAddress: n.cp.AdminAddr(),
		HTTPAddress: httpAddr, HTTPSAddress: httpsAddr,
		ConfigVersion: n.cp.AppliedConfigVersion(),
		StartedAt:     n.started, LastSeenAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	db := n.cp.Store().DB.WithContext(rctx)
	err := db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error
	if err == nil {
		err = db.Where("last_seen_at < ?", time.Now().UTC().Add(-forgetAfter)).Delete(&storage.ClusterNode{}).Error
	}
	n.storeState("heartbeat", err)
}

func (n *node) heartbeats(ctx context.Context) {
	defer n.wg.Done()
	tick.Every(ctx, HeartbeatInterval, n.heartbeat, func() { n.report(ctx) })
}

// syncer compares the stored version with the live one when notified or
// every CheckInterval, and reloads on a difference. Requests coalesce: a
// burst of notifications costs one comparison per reload.
func (n *node) syncer(ctx context.Context) {
	defer n.wg.Done()
	tick.Every(ctx, CheckInterval, n.sync, func() {
		changed, err := n.cp.SyncFromStore(ctx)
		if ctx.Err() != nil {
			return
		}
		var se *controlplane.SyncError
		if errors.As(err, &se) {
			// The store answered; the configuration is what failed (logged
			// at each try, which backs off).
			n.logger.Error("serving the last configuration that loaded", zap.Int64("config_version", n.cp.AppliedConfigVersion()), zap.Error(err))
			err = nil
		}
		n.storeState("configuration check", err)
		if changed {
			n.logger.Info("loaded a configuration change from the store", zap.Int64("config_version", n.cp.AppliedConfigVersion()))
			kick(n.heartbeat)
		}
	})
}

// listen keeps a dedicated connection LISTENing for configuration changes,
// reconnecting (and re-listening) after the store comes back.
func (n *node) listen(ctx context.Context) {
	defer n.wg.Done()
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		err := n.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		n.storeState("listening for changes", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
		if err == nil {
			backoff = 250 * time.Millisecond
		}
	}
}

func (n *node) listenOnce(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(n.cp.Boot().StoreDSN())
	if err != nil {
		return fmt.Errorf("parsing the PostgreSQL DSN: %w", err)
	}
	// A wait that times out must only interrupt the read (the connection
	// stays usable), not send the server a cancel request.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("connecting the change listener: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{storage.ConfigChannel}.Sanitize()); err != nil {
		return fmt.Errorf("LISTEN: %w", err)
	}
	// Whatever was committed while this node was not listening.
	kick(n.sync)
	n.storeState("listening for changes", nil)
	for {
		wctx, wcancel := context.WithTimeout(ctx, listenPing)
		_, err := conn.WaitForNotification(wctx)
		wcancel()
		switch {
		case err == nil:
			kick(n.sync)
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pctx)
			pcancel()
			if err != nil {
				return fmt.Errorf("change listener: %w", err)
			}
		default:
			return fmt.Errorf("change listener: %w", err)
		}
	}
}
