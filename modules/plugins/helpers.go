package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/caddyserver/caddy/v2"
)

// Helpers shared by the plugin types' implementations.

// Instance is embedded by the plugin types whose state outlives config
// reloads (rate-limit counters, proxy-cache entries, http-log senders).
type Instance struct {
	// InstanceID is the plugin's id, set by the gateway's config compiler:
	// the plugin's state is kept per instance in a process-wide store and
	// survives reloads. Standalone configs (no id) are keyed by their
	// settings (InstanceKey).
	InstanceID int64 `json:"instance_id,omitempty" schema:"internal"`
}

// InstanceKey identifies a plugin instance in process-wide state that
// outlives config reloads: its id (set by the gateway's config compiler),
// or, used standalone, a hash of its settings, so that a reload with the
// same settings finds the same state.
func InstanceKey(id int64, settings any) string {
	if id > 0 {
		return "id:" + strconv.FormatInt(id, 10)
	}
	b, _ := json.Marshal(settings)
	sum := sha256.Sum256(b)
	return "cfg:" + hex.EncodeToString(sum[:8])
}

// Holders counts the provisioned plugin instances per key prefix of a
// process-wide store, as Caddy's reverse_proxy counts its hosts: a reload
// provisions the new instance before the old one is cleaned up, so the
// count never drops to zero and the state under the prefix stays; when an
// instance gone from the config for good (or a stopped server) releases
// the prefix last, its state is dropped.
type Holders struct {
	pool *caddy.UsagePool
	drop func(prefix string) int
}

// NewHolders returns the holders of a store whose state under a prefix
// drop removes.
func NewHolders(drop func(prefix string) int) *Holders {
	return &Holders{pool: caddy.NewUsagePool(), drop: drop}
}

// Hold counts an instance (from its Provision) holding prefix. The
// instance keeps the result (an embedded Held), whose Cleanup releases it.
func (h *Holders) Hold(prefix string) Held {
	_, _ = h.pool.LoadOrStore(prefix, heldPrefix{prefix, h.drop})
	return Held{holders: h, prefix: prefix}
}

// Held is embedded by the plugin types whose instances hold a prefix of a
// process-wide store (Holders): their Provision sets it, its Cleanup is
// theirs (caddy.CleanerUpper).
type Held struct {
	holders *Holders
	prefix  string
}

// Cleanup implements caddy.CleanerUpper: the instance releases its prefix;
// the state under it stays while a newer config's instance holds it. An
// instance whose Provision did not get as far as holding, or that was
// cleaned up already, releases nothing.
func (h *Held) Cleanup() error {
	if h.holders != nil {
		_, _ = h.holders.pool.Delete(h.prefix)
		h.holders = nil
	}
	return nil
}

// heldPrefix is one prefix's entry in the usage pool.
type heldPrefix struct {
	prefix string
	drop   func(string) int
}

// Destruct implements caddy.Destructor: the last instance holding the
// prefix is gone.
func (e heldPrefix) Destruct() error {
	e.drop(e.prefix)
	return nil
}
