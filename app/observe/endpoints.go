package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/internal/records"
)

// keepAliveInterval is how often the event stream sends a comment line so
// that proxies and browsers keep an idle stream open (15 s, docs/operations.md).
var keepAliveInterval = 15 * time.Second

// authRecheckInterval is how often an open event stream checks that its
// credential is still valid (Call.StillAllowed): a stream outlives the
// request that authenticated it.
var authRecheckInterval = 2 * time.Second

// Endpoints are the observability endpoints: liveness, the live
// configuration's summary, target health, the router's dry run, and rec's
// metrics, recent requests and event stream. rec may be nil when the
// endpoints are only listed (documentation).
func Endpoints(rec *Recorder) []*api.Endpoint {
	return append(systemEndpoints(), recorderEndpoints(rec)...)
}

func recorderEndpoints(rec *Recorder) []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/metrics", Role: api.RolePublic, Tag: "system",
			Summary: "Prometheus metrics (text exposition format)",
			Description: "gateway_requests_total, gateway_responses_total{class}, gateway_unmatched_requests_total, gateway_request_duration_seconds (histogram), " +
				"gateway_recent_latency_seconds{quantile} (a summary: quantiles 0.5, 0.95, 0.99 over the last 1024 requests, _count and _sum over all requests), gateway_route_requests_total{route_id,route}, gateway_route_errors_total{route_id,route}, " +
				"gateway_consumer_requests_total{consumer_id,consumer}, gateway_target_healthy{service_id,target}, gateway_stream_connections_active{stream_route_id}, gateway_stream_connections_total{stream_route_id}; as an extension, gateway_otel_spans_exported_total and gateway_otel_spans_dropped_total{reason} (queue_full, export_failed) of the opentelemetry plugins. " +
				"Counts live in memory and start at zero with the process. Per route, consumer and stream route series follow the running configuration: " +
				"they carry the current name, and a route or stream route that is deleted or disabled, or a consumer that is deleted, leaves them (no stale series). " +
				"The exposition passes promtool check metrics. Every series carries a node label (the node id of GET /api/v1/cluster): on a cluster each node counts its own traffic and is scraped on its own.",
			ContentType: "text/plain", Raw: func(c *api.Call) { rec.prometheusMetrics(c) }},
		{Method: "GET", Path: "/api/v1/metrics", Role: api.RoleViewer, Tag: "observability",
			Summary: "In-memory snapshot of traffic counts and recent latency",
			Description: "latency_ms percentiles cover the last latency_window (1024) requests; route errors are responses with status 500 or above, from the upstream or the proxy. " +
				"routes and consumers list those of the running configuration (a deleted or disabled route and a deleted consumer leave the lists); streams counts every connection since the process started. " +
				"Per node: on a cluster, this node's traffic only.",
			Response: MetricsSnapshot{}, Handle: func(c *api.Call) (any, error) { return rec.Metrics.Snapshot(), nil }},
		{Method: "GET", Path: "/api/v1/metrics/history", Role: api.RoleViewer, Tag: "observability",
			Summary: "Traffic over the last hour: one point per 10 s",
			Description: "In memory for the process (it survives configuration changes and starts empty with the process): requests by status class, " +
				"latency percentiles, and per route and per consumer request and error counts (errors: status 500 or above), for every 10 s step from the " +
				"process start or an hour ago up to the current step, which is still filling. The size is bounded: at most 360 points, each with at most 50 routes and 50 consumers. " +
				"The event stream (GET /api/v1/events) carries the requests that complete afterwards.",
			Response: HistoryAnswer{}, Handle: func(c *api.Call) (any, error) { return rec.History.Snapshot(time.Now()), nil }},
		{Method: "GET", Path: "/api/v1/requests", Role: api.RoleViewer, Tag: "observability",
			Summary:     "Recent proxied requests, newest first",
			Description: "From an in-memory ring of the last 500 requests this node proxied (per node on a cluster). limit: 0..500, default 100; larger values are clamped to 500; negative or non-integer values are 400.",
			Query:       []api.QueryParam{{Name: "limit", Type: "integer", Description: "0..500, default 100"}},
			Response:    records.Record{}, ResponseList: true, Statuses: []int{400}, Handle: rec.recentRequests},
		{Method: "GET", Path: "/api/v1/events", Role: api.RoleViewer, Tag: "observability",
			Summary: "Live stream of completed requests (Server-Sent Events)",
			Description: "text/event-stream that never ends on its own: one event per request completed by this node (per node on a cluster), `id:` the record id and one `data:` line with " +
				"the record as JSON (the shape of GET /api/v1/requests items); a `: keep-alive` comment every 15 s. A client that falls behind loses events. " +
				"Besides the Authorization and X-Admin-Token headers, the admin token may be given as the access_token query parameter (for browser EventSource clients), on this endpoint only. " +
				"A caller (a user, the admin token, open mode) holds at most 16 streams open at once on a node: opening one more ends the caller's oldest. " +
				"Every 2 s a stream checks its credential again: it ends once the admin token it was opened with is rotated or deleted, or its session ends (sign-out, the user deleted or given a new password), on any node of a cluster.",
			Query:          []api.QueryParam{{Name: "access_token", Type: "string", Description: "the admin token (this endpoint only)"}},
			ContentType:    "text/event-stream",
			ResponseSchema: map[string]any{"type": "string"},
			Raw:            func(c *api.Call) { rec.eventStream(c) }},
	}
}

func (rec *Recorder) prometheusMetrics(c *api.Call) {
	g := nodeLabel{rec.Metrics.registry, c.CP.NodeID()}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(c.W, c.R)
}

// nodeLabel adds the node label to every metric: the counts are per node
// (each node of a cluster is scraped on its own), and the label tells the
// series apart when they are aggregated.
type nodeLabel struct {
	prometheus.Gatherer
	node string
}

func (g nodeLabel) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := g.Gatherer.Gather()
	name := "node"
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			m.Label = append(m.Label, &dto.LabelPair{Name: &name, Value: &g.node})
			slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
		}
	}
	return mfs, err
}

func (rec *Recorder) recentRequests(c *api.Call) (any, error) {
	limit := 100
	if s := c.R.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if errors.Is(err, strconv.ErrRange) && n > 0 {
			n, err = RingSize, nil // larger values are clamped, however large
		}
		if err != nil || n < 0 {
			return nil, api.BadRequest("limit: must be an integer from 0 to 500 (larger values are clamped to 500)")
		}
		limit = min(n, RingSize)
	}
	return rec.Recent(limit), nil
}

// streamCaller names the caller an event stream counts against.
func streamCaller(p *api.Principal) string {
	switch {
	case p == nil:
		return "open"
	case p.User != nil:
		return "user " + strconv.FormatInt(p.User.ID, 10)
	}
	return p.Method
}

func (rec *Recorder) eventStream(c *api.Call) {
	w := c.W
	rc := http.NewResponseController(w)
	ch, cancel := rec.Subscribe(streamCaller(api.PrincipalFrom(c.Ctx())), 256)
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
	recheck := time.NewTicker(authRecheckInterval)
	defer recheck.Stop()
	for {
		select {
		case <-c.R.Context().Done():
			return
		case <-recheck.C:
			if !c.StillAllowed() {
				return // the credential it was opened with was revoked
			}
			continue
		case r, ok := <-ch:
			if !ok {
				return // the gateway is shutting down, or the caller opened too many streams
			}
			b, _ := json.Marshal(r)
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", r.ID, b); err != nil {
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
