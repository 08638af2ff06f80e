package observe

import (
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
)

// TestHistoryBounded: over more than an hour of traffic the history keeps
// 360 points, the oldest dropped; a point keeps at most HistoryKeys routes
// and consumers, the rest counted together; percentiles come from the
// point's own requests.
func TestHistoryBounded(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h := &History{started: stepOf(t0)}
	for i := 0; i < 500; i++ { // 500 steps: 83 minutes
		now := t0.Add(time.Duration(i) * HistoryStep)
		h.observe(now, &gwctx.Info{Matched: true, RouteID: int64(i % 3), RouteName: "r"}, 200, time.Millisecond, int64(i+1))
	}
	end := t0.Add(499 * HistoryStep)
	s := h.Snapshot(end)
	if len(s.Points) != HistoryPoints {
		t.Fatalf("%d points, want %d", len(s.Points), HistoryPoints)
	}
	if first := s.Points[0].Time; !first.Equal(time.Unix(stepOf(end)*10-3590, 0).UTC()) {
		t.Errorf("oldest point %v", first)
	}
	for _, p := range s.Points {
		if p.Requests != 1 {
			t.Fatalf("point %v: %d requests, want 1 (a stale slot was not reset)", p.Time, p.Requests)
		}
	}

	// Many routes and consumers in one step, and a latency spread.
	now := end.Add(HistoryStep)
	for i := 0; i < 120; i++ {
		c := &consumers.Consumer{ID: int64(i), Username: "c"}
		status := 200
		if i%10 == 0 {
			status = 502
		}
		lat := time.Millisecond
		if i >= 110 { // the slowest 10 of 120
			lat = time.Second
		}
		h.observe(now, &gwctx.Info{Matched: true, RouteID: int64(i), RouteName: "r", Consumer: c}, status, lat, int64(1000+i))
	}
	p := h.Snapshot(now).Points
	last := p[len(p)-1]
	if len(last.Routes) != HistoryKeys || len(last.Consumers) != HistoryKeys || last.OtherR == nil || last.OtherR.Requests != 70 ||
		last.OtherC.Requests != 70 || last.Requests != 120 || last.Status["5xx"] != 12 {
		t.Fatalf("point with 120 routes: %d routes, %d consumers, other %+v %+v, %d requests, %v",
			len(last.Routes), len(last.Consumers), last.OtherR, last.OtherC, last.Requests, last.Status)
	}
	if l := last.LatencyMS; l.P50 < 1 || l.P50 > 1.2 || l.P95 < 1000 || l.P95 > 1200 || l.P99 < 1000 {
		t.Errorf("latency %+v, want p50 ≈ 1 ms and p95, p99 ≈ 1 s", l)
	}
	if s := h.Snapshot(now); s.LastID != 1119 {
		t.Errorf("last_id %d, want 1119", s.LastID)
	}
	if len(p) != HistoryPoints {
		t.Errorf("%d points", len(p))
	}
}
