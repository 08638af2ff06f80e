package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
	"github.com/caddy-gateway/gateway/adminext/observe"
)

// TestMetricsHistory: the points of GET /api/v1/metrics/history add up to
// what the requests did (status classes, unmatched, per route and per
// consumer requests and errors, by name), one point per 10 s without gaps,
// and the answer is bounded (and the size stays bounded over more than an
// hour of traffic: observe's unit test).
func TestMetricsHistory(t *testing.T) {
	g, sid := echoGateway(t)
	ok := g.Route("ok-route", sid, testgw.Paths("/ok"))
	broken := g.Route("dead-route", g.DeadService("dead"), testgw.Paths("/dead"))
	keyed := g.Route("keyed", sid, testgw.Paths("/keyed"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": keyed})
	alice := g.Consumer("alice", map[string]any{"type": "key-auth", "key": "k-alice"})

	for i := 0; i < 4; i++ {
		g.Get("", "/ok")
	}
	g.Get("", "/dead")
	g.Get("", "/dead")
	g.Get("", "/nowhere")
	g.Get("", "/keyed") // 401: no consumer
	for i := 0; i < 3; i++ {
		if a := g.Proxy(t, "GET", "/keyed", nil, "apikey", "k-alice"); a.Status != 200 {
			t.Fatalf("keyed request: %d %s", a.Status, a.Body)
		}
	}

	var h observe.HistoryAnswer
	if st := g.JSON("GET", "/api/v1/metrics/history", nil, &h); st != 200 {
		t.Fatalf("history: %d", st)
	}
	var recent []map[string]any
	g.JSON("GET", "/api/v1/requests?limit=1", nil, &recent)
	if len(recent) != 1 || float64(h.LastID) != recent[0]["id"] {
		t.Errorf("last_id %d, newest record %v", h.LastID, recent)
	}
	if h.StepS != 10 || h.MaxPoints != 360 || len(h.Points) == 0 || len(h.Points) > h.MaxPoints {
		t.Fatalf("history: step %d, max %d, %d points", h.StepS, h.MaxPoints, len(h.Points))
	}
	for i, p := range h.Points {
		if i > 0 && !p.Time.Equal(h.Points[i-1].Time.Add(10*time.Second)) {
			t.Fatalf("points %d and %d are not 10 s apart: %v %v", i-1, i, h.Points[i-1].Time, p.Time)
		}
	}
	if last := h.Points[len(h.Points)-1].Time; time.Since(last) > 10*time.Second || time.Since(last) < 0 {
		t.Errorf("the last point (%v) is not the current step", last)
	}

	var requests, unmatched int64
	status := map[string]int64{}
	type rc struct {
		name             string
		requests, errors int64
	}
	routes, consumers := map[int64]rc{}, map[int64]rc{}
	var slowest float64
	for _, p := range h.Points {
		requests += p.Requests
		unmatched += p.Unmatched
		var sum int64
		for k, v := range p.Status {
			status[k] += v
			sum += v
		}
		if sum != p.Requests {
			t.Errorf("point %v: status classes add up to %d, requests %d", p.Time, sum, p.Requests)
		}
		if p.Requests > 0 && (p.LatencyMS.P50 <= 0 || p.LatencyMS.P95 < p.LatencyMS.P50 || p.LatencyMS.P99 < p.LatencyMS.P95) {
			t.Errorf("point %v latency: %+v", p.Time, p.LatencyMS)
		}
		slowest = max(slowest, p.LatencyMS.P99)
		for _, r := range p.Routes {
			c := routes[r.RouteID]
			routes[r.RouteID] = rc{r.RouteName, c.requests + r.Requests, c.errors + r.Errors}
		}
		for _, r := range p.Consumers {
			c := consumers[r.ConsumerID]
			consumers[r.ConsumerID] = rc{r.Username, c.requests + r.Requests, c.errors + r.Errors}
		}
	}
	if requests != 11 || unmatched != 1 || status["2xx"] != 7 || status["4xx"] != 2 || status["5xx"] != 2 {
		t.Errorf("history totals: %d requests, %d unmatched, status %v", requests, unmatched, status)
	}
	if slowest <= 0 {
		t.Error("no latency in any point")
	}
	want := map[int64]rc{ok: {"ok-route", 4, 0}, broken: {"dead-route", 2, 2}, keyed: {"keyed", 4, 0}}
	if fmt.Sprint(routes) != fmt.Sprint(want) {
		t.Errorf("routes: %v, want %v", routes, want)
	}
	if want := map[int64]rc{alice: {"alice", 3, 0}}; fmt.Sprint(consumers) != fmt.Sprint(want) {
		t.Errorf("consumers: %v, want %v", consumers, want)
	}

	// A configuration change (reload) keeps the history.
	g.Route("later", sid, testgw.Paths("/later"))
	var after observe.HistoryAnswer
	g.JSON("GET", "/api/v1/metrics/history", nil, &after)
	var n int64
	for _, p := range after.Points {
		n += p.Requests
	}
	if n != 11 {
		t.Errorf("after a reload the history holds %d requests, want 11", n)
	}
}
