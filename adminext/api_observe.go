package adminext

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/caddy-gateway/gateway/modules/records"
)

func init() { RegisterEndpoints(observeEndpoints) }

// keepAliveInterval is how often the event stream sends a comment line so
// that proxies and browsers keep an idle stream open (15 s, docs/operations.md).
var keepAliveInterval = 15 * time.Second

func observeEndpoints() []*Endpoint {
	return []*Endpoint{
		{Method: "GET", Path: "/metrics", Role: RolePublic, Tag: "system",
			Summary: "Prometheus metrics (text exposition format)",
			Description: "gateway_requests_total, gateway_responses_total{class}, gateway_unmatched_requests_total, gateway_request_duration_seconds (histogram), " +
				"gateway_recent_latency_seconds{quantile}, gateway_route_requests_total{route_id,route}, gateway_route_errors_total{route_id,route}, " +
				"gateway_consumer_requests_total{consumer_id,consumer}, gateway_target_healthy{service_id,target}. Counts live in memory and start at zero with the process.",
			ContentType: "text/plain", Raw: prometheusMetrics},
		{Method: "GET", Path: "/api/v1/metrics", Role: RoleViewer, Tag: "observability",
			Summary:     "In-memory snapshot of traffic counts and recent latency",
			Description: "latency_ms percentiles cover the last latency_window (1024) requests; route errors are responses with status 500 or above, from the upstream or the proxy.",
			Response:    MetricsSnapshot{}, Handle: func(c *Call) (any, error) { return c.CP.recorder.Metrics.Snapshot(), nil }},
		{Method: "GET", Path: "/api/v1/requests", Role: RoleViewer, Tag: "observability",
			Summary:     "Recent proxied requests, newest first",
			Description: "From an in-memory ring of the last 500 requests. limit: 0..500, default 100; larger values are clamped to 500; negative or non-integer values are 400.",
			Query:       []QueryParam{{Name: "limit", Type: "integer", Description: "0..500, default 100"}},
			Response:    records.Record{}, ResponseList: true, Statuses: []int{400}, Handle: recentRequests},
		{Method: "GET", Path: "/api/v1/events", Role: RoleViewer, Tag: "observability",
			Summary: "Live stream of completed requests (Server-Sent Events)",
			Description: "text/event-stream that never ends on its own: one event per completed proxied request, `id:` the record id and one `data:` line with " +
				"the record as JSON (the shape of GET /api/v1/requests items); a `: keep-alive` comment every 15 s. A client that falls behind loses events. " +
				"Besides the Authorization and X-Admin-Token headers, the admin token may be given as the access_token query parameter (for browser EventSource clients), on this endpoint only.",
			Query:          []QueryParam{{Name: "access_token", Type: "string", Description: "the admin token (this endpoint only)"}},
			ContentType:    "text/event-stream",
			ResponseSchema: map[string]any{"type": "string"},
			Raw:            eventStream},
	}
}

func prometheusMetrics(c *Call) {
	promhttp.HandlerFor(c.CP.recorder.Metrics.registry, promhttp.HandlerOpts{}).ServeHTTP(c.W, c.R)
}

func recentRequests(c *Call) (any, error) {
	limit := 100
	if s := c.R.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, BadRequest("limit: must be an integer from 0 to 500")
		}
		limit = min(n, RingSize)
	}
	return c.CP.recorder.Recent(limit), nil
}

func eventStream(c *Call) {
	w := c.W
	rc := http.NewResponseController(w)
	ch, cancel := c.CP.recorder.Subscribe(256)
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": stream of completed requests\n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	tick := time.NewTicker(keepAliveInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.R.Context().Done():
			return
		case rec, ok := <-ch:
			if !ok {
				return // the gateway is shutting down
			}
			b, _ := json.Marshal(rec)
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", rec.ID, b); err != nil {
				return
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
