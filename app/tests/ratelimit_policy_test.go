package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// On a SQLite gateway without Redis, the shared rate-limit policies are
// refused with a 400 naming config.policy, and an import that brings them
// skips them with the reason (the three-node tests with Redis and
// PostgreSQL are in tests/cluster).
func TestRateLimitPolicyNeedsItsStore(t *testing.T) {
	g := testgw.Start(t, nil)
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "global",
		"config": map[string]any{"limit": 5, "policy": "redis"}}, "config.policy", "Redis", "GATEWAY_REDIS_URL")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "global",
		"config": map[string]any{"limit": 5, "policy": "cluster"}}, "config.policy", "PostgreSQL", "SQLite")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "global",
		"config": map[string]any{"limit": 5, "sync_interval_ms": 100}}, "config.sync_interval_ms")
	pid := testgw.ID(g.Must("POST", "/api/v1/plugins", map[string]any{"type": "rate-limit", "scope": "global",
		"config": map[string]any{"limit": 5}}))
	g.WantError(400, "PUT", "/api/v1/plugins/"+itoa(pid), map[string]any{"type": "rate-limit", "scope": "global",
		"config": map[string]any{"limit": 5, "policy": "cluster"}}, "config.policy")

	// An export of a gateway that had them, imported here.
	st, export := g.Do("GET", "/api/v1/export", nil)
	var doc map[string]any
	if st != 200 || json.Unmarshal(export, &doc) != nil {
		t.Fatalf("export: %d %s", st, export)
	}
	doc["plugins"] = []any{
		map[string]any{"id": 1, "type": "rate-limit", "scope": "global", "config": map[string]any{"limit": 5, "policy": "cluster"}},
		map[string]any{"id": 2, "type": "rate-limit", "scope": "global", "config": map[string]any{"limit": 7, "policy": "redis"}},
	}
	var report struct {
		Skipped []struct{ Kind, Ref, Reason string } `json:"skipped"`
	}
	b, _ := json.Marshal(doc)
	if st, body := g.Do("POST", "/api/v1/import", json.RawMessage(b)); st != 200 || json.Unmarshal(body, &report) != nil {
		t.Fatalf("import: %d %s", st, body)
	}
	if len(report.Skipped) != 2 || !strings.Contains(report.Skipped[0].Reason, "PostgreSQL") ||
		!strings.Contains(report.Skipped[1].Reason, "Redis") {
		t.Fatalf("import report: %+v", report)
	}
}
