package observe

import (
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/health"
	"github.com/caddy-gateway/gateway/internal/streams"
	"github.com/caddy-gateway/gateway/modules/router"
)

// emptyConfig is a running configuration with no routes and no consumers
// (a router that was never given any).
type emptyConfig struct{}

func (emptyConfig) Health() *health.Registry { return nil }
func (emptyConfig) Streams() *streams.Server { return nil }
func (emptyConfig) Router() *router.Router   { return &router.Router{} }

// TestMetricsCountsStayBounded: the counts of routes and consumers that
// left the configuration are dropped even when nobody reads the metrics,
// so a gateway whose routes come and go keeps counts in proportion to its
// live configuration, not to its history (the end-to-end rules are
// app/tests' TestMetricsFollowTheConfiguration).
func TestMetricsCountsStayBounded(t *testing.T) {
	m := NewMetrics(emptyConfig{})
	for id := int64(1); id <= 20*minPruneAt; id++ {
		m.observe(&gwctx.Info{Matched: true, RouteID: id, RouteName: "gone"}, 200, time.Millisecond)
	}
	if n := len(m.routes); n > minPruneAt {
		t.Fatalf("%d counts of routes no configuration has, want at most %d", n, minPruneAt)
	}
	if m.total != 20*minPruneAt {
		t.Fatalf("total %d", m.total)
	}
}
