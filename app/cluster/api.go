package cluster

import (
	"time"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/modules/plugins/ratelimit/shared"
	"github.com/caddy-gateway/gateway/storage"
)

// Endpoints is GET /api/v1/cluster.
func Endpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/cluster", Role: api.RoleViewer, Tag: "observability",
			Summary: "The gateway nodes sharing this store",
			Description: "Every gateway process using the store registers itself and reports every 5 s: its admin and proxy addresses, " +
				"the configuration version it serves and when it started. A node that has not reported for 15 s is stale " +
				"(stopped without leaving, partitioned from the database, or hung); a node that stops cleanly leaves the list, " +
				"and rows of nodes gone for 24 h are deleted. On SQLite the list has this one node. " +
				"Metrics, the recent-request buffer, the event stream and the counters of rate limits with policy local are per node: ask each node. " +
				"rate_limit_stores (extension) is this node's view of the shared stores of the rate-limit policies redis and cluster.",
			Response: Cluster{}, Handle: list},
	}
}

// Cluster is the answer of GET /api/v1/cluster.
type Cluster struct {
	Mode          string `json:"mode" doc:"postgres: any number of nodes share the store; sqlite: a single node."`
	NodeID        string `json:"node_id" doc:"The id of the node that answered."`
	ConfigVersion int64  `json:"config_version" doc:"The stored configuration version: a node serving it is up to date."`
	Nodes         []Node `json:"nodes" doc:"In id order."`
	// Extension: the rate limits' shared stores.
	RateLimitStores RateLimitStores `json:"rate_limit_stores" doc:"Extension: this node's connections to the shared stores of the rate-limit plugin's policies."`
}

// RateLimitStores is the state of the rate limits' shared stores.
type RateLimitStores struct {
	Redis   shared.Status `json:"redis" doc:"policy redis: the Redis of the gateway's redis option (GATEWAY_REDIS_URL), without credentials."`
	Cluster shared.Status `json:"cluster" doc:"policy cluster: the PostgreSQL store (not configured on SQLite)."`
}

// Node is one gateway node: its stored row (storage.ClusterNode, the
// fields' declaration) and what the answer adds.
type Node struct {
	storage.ClusterNode
	Stale bool `json:"stale" doc:"No report for 15 s."`
	Self  bool `json:"self" doc:"The node that answered."`
}

func list(c *api.Call) (any, error) {
	db := c.CP.Store().DB.WithContext(c.Ctx())
	version, err := storage.ConfigVersion(db)
	if err != nil {
		return nil, err
	}
	var rows []storage.ClusterNode
	if err := db.Order("id").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := Cluster{Mode: c.CP.Store().Kind, ConfigVersion: version, Nodes: []Node{},
		RateLimitStores: RateLimitStores{Redis: shared.RedisStatus(), Cluster: shared.PostgresStatus()}}
	if n := nodeOf(c.CP); n != nil {
		out.NodeID = n.id
	}
	now := time.Now()
	for _, r := range rows {
		if r.ID == out.NodeID {
			// The answering node's own entry is current, not as of its
			// last report.
			r.ConfigVersion = c.CP.AppliedConfigVersion()
			r.HTTPAddress, r.HTTPSAddress = c.CP.ProxyAddresses()
			r.LastSeenAt = now.UTC()
		}
		out.Nodes = append(out.Nodes, Node{ClusterNode: r, Stale: now.Sub(r.LastSeenAt) > StaleAfter, Self: r.ID == out.NodeID})
	}
	return out, nil
}
