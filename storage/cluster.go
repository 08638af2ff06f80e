package storage

import (
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"
)

// Tables of cluster mode (package app/cluster): several gateway nodes
// on one PostgreSQL store. They exist on SQLite too (one node), so the API
// answers the same shapes. None of them is routing configuration: they are
// never exported or imported.

func init() {
	registerModels(&ClusterState{}, &ClusterNode{}, &LoginFailure{})
	registerSnapshotLoader(func(db *gorm.DB, snap *Snapshot) error {
		v, err := ConfigVersion(db)
		if err != nil {
			return err
		}
		snap.Extra[configVersionKey] = v
		return nil
	})
}

// ConfigChannel is the PostgreSQL notification channel on which every
// committed configuration change announces its version.
const ConfigChannel = "gateway_config"

const configVersionKey = "config_version"

// ClusterState is the one row (id 1) of cluster-wide state: the version of
// the stored configuration, incremented by every committed mutation.
type ClusterState struct {
	ID            int64 `gorm:"primaryKey;autoIncrement:false"`
	ConfigVersion int64 `gorm:"not null;default:0"`
}

// TableName implements gorm's tabler.
func (ClusterState) TableName() string { return "gateway_cluster" }

// ClusterNode is one gateway process that uses this store, as it last
// reported itself (heartbeat).
type ClusterNode struct {
	ID            string    `json:"id" gorm:"primaryKey" doc:"hostname/admin address of the node."`
	Hostname      string    `json:"hostname" gorm:"not null;default:''"`
	AdminAddress  string    `json:"admin_address" gorm:"not null;default:''"`
	HTTPAddress   string    `json:"http_address" gorm:"not null;default:''" doc:"The node's HTTP proxy listener."`
	HTTPSAddress  string    `json:"https_address" gorm:"not null;default:''" doc:"The node's HTTPS proxy listener; empty when HTTPS is disabled."`
	ConfigVersion int64     `json:"config_version" gorm:"not null;default:0" doc:"The configuration version the node served at its last report."`
	StartedAt     time.Time `json:"started_at"`
	LastSeenAt    time.Time `json:"last_seen_at" gorm:"index"`
}

// TableName implements gorm's tabler.
func (ClusterNode) TableName() string { return "cluster_nodes" }

// LoginFailure is one failed admin sign-in of a client (an IP address or an
// IPv6 /64), shared by every node so the limit holds across the cluster.
// Every query of the table goes through an index, so the work of a failed
// login does not grow with the table: a client's rows by (client_key, at),
// the rows out of the window by at, the oldest rows by id.
type LoginFailure struct {
	ID        int64     `gorm:"primaryKey"`
	ClientKey string    `gorm:"index:idx_login_failures_key_at,priority:1;not null"`
	At        time.Time `gorm:"index:idx_login_failures_key_at,priority:2;index:idx_login_failures_at;not null"`
}

// TableName implements gorm's tabler.
func (LoginFailure) TableName() string { return "login_failures" }

// ConfigVersion is the stored configuration version (0 before the first
// change).
func ConfigVersion(db *gorm.DB) (int64, error) {
	var rows []ClusterState
	if err := db.Where("id = 1").Limit(1).Find(&rows).Error; err != nil {
		return 0, fmt.Errorf("reading the configuration version: %w", err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	return rows[0].ConfigVersion, nil
}

// BumpConfigVersion increments the stored configuration version inside a
// mutation's transaction and returns the new value. The row lock it takes
// serializes mutations across every node sharing the store until the
// transaction ends. On PostgreSQL the transaction also notifies
// ConfigChannel; the notification is delivered only if it commits.
func (s *Store) BumpConfigVersion(tx *gorm.DB) (int64, error) {
	var v int64
	err := tx.Raw(`INSERT INTO gateway_cluster (id, config_version) VALUES (1, 1)
		ON CONFLICT (id) DO UPDATE SET config_version = gateway_cluster.config_version + 1
		RETURNING config_version`).Scan(&v).Error
	if err != nil {
		return 0, fmt.Errorf("incrementing the configuration version: %w", err)
	}
	if s.Kind == "postgres" {
		if err := tx.Exec("SELECT pg_notify(?, ?)", ConfigChannel, strconv.FormatInt(v, 10)).Error; err != nil {
			return 0, fmt.Errorf("notifying the configuration change: %w", err)
		}
	}
	return v, nil
}

// ConfigVersion is the stored configuration version the snapshot was read
// at.
func (s *Snapshot) ConfigVersion() int64 {
	v, _ := s.Extra[configVersionKey].(int64)
	return v
}
