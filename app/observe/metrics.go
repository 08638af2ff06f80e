package observe

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/health"
	"github.com/caddy-gateway/gateway/internal/streams"
	"github.com/caddy-gateway/gateway/modules/plugins/opentelemetry"
	"github.com/caddy-gateway/gateway/modules/plugins/ratelimit/shared"
	"github.com/caddy-gateway/gateway/modules/router"
)

// LatencyWindow is how many recent requests the latency percentiles cover
// (docs/operations.md).
const LatencyWindow = 1024

// Metrics counts proxied traffic for GET /api/v1/metrics (JSON) and
// /metrics (Prometheus). It belongs to the control plane, so counts survive
// config reloads.
//
// Per route and per consumer counts follow the running configuration: a
// route that leaves the routing table (deleted or disabled) or a deleted
// consumer leaves both answers, and a series is labelled with the current
// name, so renames and deletions leave no stale series behind and the
// counts' memory is that of the live configuration.
type Metrics struct {
	started time.Time
	live    Live

	mu        sync.Mutex
	total     int64
	unmatched int64
	classes   [5]int64 // 1xx … 5xx
	latencyS  float64  // sum of all latencies, seconds (the summary's _sum)
	window    [LatencyWindow]float64
	wn, wpos  int
	routes    map[int64]*routeCount
	consumers map[int64]int64
	// waf counts the waf plugin's matched rules per route, action and
	// rule (bounded: the routes of the configuration times the rules of
	// their rule sets; pruned with the routes).
	waf     map[wafKey]int64
	pruneAt int // len(routes)+len(consumers) at which observe prunes

	registry   *prometheus.Registry
	requests   prometheus.Counter
	unmatchedC prometheus.Counter
	responses  *prometheus.CounterVec
	duration   prometheus.Histogram
}

type routeCount struct{ requests, errors int64 }

type wafKey struct {
	route  int64
	action string
	rule   int
}

// Live is the state the metrics read when asked, not counted from records:
// the control plane's target health, TCP stream connections and the
// running router (its routes and consumers name the per route and per
// consumer counts).
type Live interface {
	Health() *health.Registry
	Streams() *streams.Server
	Router() *router.Router
}

// NewMetrics returns zeroed metrics with their Prometheus registry.
func NewMetrics(live Live) *Metrics {
	m := &Metrics{
		started:   time.Now().UTC(),
		live:      live,
		routes:    map[int64]*routeCount{},
		consumers: map[int64]int64{},
		waf:       map[wafKey]int64{},
		pruneAt:   minPruneAt,
		registry:  prometheus.NewRegistry(),
		requests:  prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_requests_total", Help: "Proxied requests."}),
		unmatchedC: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_unmatched_requests_total",
			Help: "Proxied requests that matched no route (404)."}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_responses_total",
			Help: "Responses by status class."}, []string{"class"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gateway_request_duration_seconds",
			Help: "Time from request to the end of the response.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
	}
	m.registry.MustRegister(m.requests, m.unmatchedC, m.responses, m.duration, scrapeCollector{m})
	return m
}

// minPruneAt is the number of per route and per consumer counts below
// which observe never prunes.
const minPruneAt = 1024

// observe counts one completed request.
func (m *Metrics) observe(info *gwctx.Info, status int, latency time.Duration) {
	class := status/100 - 1
	sec := latency.Seconds()
	m.mu.Lock()
	m.total++
	m.latencyS += sec
	if !info.Matched {
		m.unmatched++
	}
	if class >= 0 && class < 5 {
		m.classes[class]++
	}
	m.window[m.wpos] = sec * 1000
	m.wpos = (m.wpos + 1) % LatencyWindow
	if m.wn < LatencyWindow {
		m.wn++
	}
	if info.Matched {
		rc := m.routes[info.RouteID]
		if rc == nil {
			rc = &routeCount{}
			m.routes[info.RouteID] = rc
		}
		rc.requests++
		if status >= 500 {
			rc.errors++
		}
	}
	if info.Consumer != nil {
		m.consumers[info.Consumer.ID]++
	}
	if v := info.WAF; v != nil && info.Matched {
		for _, r := range v.Rules {
			m.waf[wafKey{info.RouteID, v.Action, r.ID}]++
		}
	}
	// Counts of routes and consumers gone from the configuration are
	// dropped when asked for (Snapshot, a scrape) and, without anyone
	// asking, whenever the counts have doubled since the last pruning.
	if n := len(m.routes) + len(m.consumers); n >= m.pruneAt {
		m.pruneLocked()
		m.pruneAt = max(minPruneAt, 2*(len(m.routes)+len(m.consumers)))
	}
	m.mu.Unlock()

	m.requests.Inc()
	m.duration.Observe(sec)
	if class >= 0 && class < 5 {
		m.responses.WithLabelValues(classNames[class]).Inc()
	}
	if !info.Matched {
		m.unmatchedC.Inc()
	}
}

// pruneLocked drops the counts of routes that left the routing table and of
// consumers that were deleted. m.mu is held.
func (m *Metrics) pruneLocked() { m.pruneBy(m.live.Router()) }

// pruneBy prunes by the configuration rt runs (nil: nothing runs yet,
// nothing to compare with).
func (m *Metrics) pruneBy(rt *router.Router) {
	if rt == nil {
		return
	}
	table, cons := rt.Table(), rt.ConsumerTable()
	for id := range m.routes {
		if table.Route(id) == nil {
			delete(m.routes, id)
		}
	}
	for id := range m.consumers {
		if cons.ByID(id) == nil {
			delete(m.consumers, id)
		}
	}
	for k := range m.waf {
		if table.Route(k.route) == nil {
			delete(m.waf, k)
		}
	}
}

var classNames = [5]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// percentiles of the latency window, in milliseconds.
func (m *Metrics) percentiles() (p50, p95, p99 float64) {
	p50, p95, p99, _, _ = m.latency()
	return p50, p95, p99
}

// latency is the percentiles of the latency window, in milliseconds, with
// the count and sum (seconds) of every latency observed, read together.
func (m *Metrics) latency() (p50, p95, p99 float64, count int64, sum float64) {
	m.mu.Lock()
	vals := append([]float64(nil), m.window[:m.wn]...)
	count, sum = m.total, m.latencyS
	m.mu.Unlock()
	if len(vals) == 0 {
		return 0, 0, 0, count, sum
	}
	sort.Float64s(vals)
	at := func(q float64) float64 {
		i := int(q*float64(len(vals))+0.5) - 1
		return vals[max(0, min(i, len(vals)-1))]
	}
	return at(0.50), at(0.95), at(0.99), count, sum
}

// MetricsSnapshot is the JSON answer of GET /api/v1/metrics.
type MetricsSnapshot struct {
	StartedAt         time.Time        `json:"started_at"`
	UptimeS           float64          `json:"uptime_s"`
	TotalRequests     int64            `json:"total_requests"`
	UnmatchedRequests int64            `json:"unmatched_requests"`
	Status            map[string]int64 `json:"status"`
	LatencyMS         LatencyMS        `json:"latency_ms"`
	LatencyWindow     int              `json:"latency_window"`
	Routes            []RouteMetrics   `json:"routes"`
	Consumers         []ConsumerMetric `json:"consumers"`
	Streams           StreamMetrics    `json:"streams"`
}

// LatencyMS are percentiles over the latency window.
type LatencyMS struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// RouteMetrics counts one route's requests and errors (status ≥ 500).
type RouteMetrics struct {
	RouteID  int64 `json:"route_id"`
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
}

// ConsumerMetric counts one consumer's requests.
type ConsumerMetric struct {
	ConsumerID int64 `json:"consumer_id"`
	Requests   int64 `json:"requests"`
}

// StreamMetrics counts TCP stream connections.
type StreamMetrics struct {
	Active int64 `json:"active"`
	Total  int64 `json:"total"`
}

// Snapshot is the JSON view.
func (m *Metrics) Snapshot() MetricsSnapshot {
	p50, p95, p99 := m.percentiles()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	s := MetricsSnapshot{
		StartedAt: m.started, UptimeS: time.Since(m.started).Seconds(),
		TotalRequests: m.total, UnmatchedRequests: m.unmatched,
		Status:    map[string]int64{},
		LatencyMS: LatencyMS{p50, p95, p99}, LatencyWindow: LatencyWindow,
		Routes: []RouteMetrics{}, Consumers: []ConsumerMetric{},
	}
	for i, n := range classNames {
		s.Status[n] = m.classes[i]
	}
	for id, rc := range m.routes {
		s.Routes = append(s.Routes, RouteMetrics{id, rc.requests, rc.errors})
	}
	sort.Slice(s.Routes, func(i, j int) bool { return s.Routes[i].RouteID < s.Routes[j].RouteID })
	for id, n := range m.consumers {
		s.Consumers = append(s.Consumers, ConsumerMetric{id, n})
	}
	sort.Slice(s.Consumers, func(i, j int) bool { return s.Consumers[i].ConsumerID < s.Consumers[j].ConsumerID })
	s.Streams = StreamMetrics(m.live.Streams().Totals())
	return s
}

// scrapeCollector adds the series computed at scrape time: recent latency
// quantiles, target health, stream connections, and the per route and per
// consumer counters with their current names.
type scrapeCollector struct{ m *Metrics }

var (
	// A summary: the quantile label belongs to summaries only (promtool
	// check metrics refuses it elsewhere). Its quantiles cover the latency
	// window, as Prometheus' own summaries cover a recent time window;
	// _count and _sum cover every request since the start.
	recentLatencyDesc = prometheus.NewDesc("gateway_recent_latency_seconds",
		"Latency quantiles over the last 1024 requests (_count and _sum: all requests since the start).", nil, nil)
	targetHealthyDesc = prometheus.NewDesc("gateway_target_healthy",
		"1 when the target is healthy or not yet checked, 0 when unhealthy.", []string{"service_id", "target"}, nil)
	streamActiveDesc = prometheus.NewDesc("gateway_stream_connections_active",
		"Open TCP connections per stream route.", []string{"stream_route_id"}, nil)
	streamTotalDesc = prometheus.NewDesc("gateway_stream_connections_total",
		"TCP connections accepted per stream route.", []string{"stream_route_id"}, nil)
	routeRequestsDesc = prometheus.NewDesc("gateway_route_requests_total",
		"Requests per route.", []string{"route_id", "route"}, nil)
	routeErrorsDesc = prometheus.NewDesc("gateway_route_errors_total",
		"Responses with status 500 or above per route.", []string{"route_id", "route"}, nil)
	consumerRequestsDesc = prometheus.NewDesc("gateway_consumer_requests_total",
		"Requests per authenticated consumer.", []string{"consumer_id", "consumer"}, nil)
	rateLimitStoreUpDesc = prometheus.NewDesc("gateway_rate_limit_store_up",
		"1 when the shared store of a rate-limit policy (redis, cluster) answered its last take or probe, 0 when not; absent when not configured.", []string{"policy"}, nil)
	rateLimitFallbacksDesc = prometheus.NewDesc("gateway_rate_limit_fallbacks_total",
		"Requests of a shared rate-limit policy counted on this node alone because its store was unreachable (fault_tolerant).", []string{"policy"}, nil)
	// Extension: the opentelemetry plugins' export.
	otelExportedDesc = prometheus.NewDesc("gateway_otel_spans_exported_total",
		"Spans the opentelemetry plugins' collectors accepted.", nil, nil)
	otelDroppedDesc = prometheus.NewDesc("gateway_otel_spans_dropped_total",
		"Spans the opentelemetry plugins dropped: reason queue_full (the export queue was full) or export_failed (the collector did not take the batch).", []string{"reason"}, nil)
	wafMatchesDesc = prometheus.NewDesc("gateway_waf_rule_matches_total",
		"Requests on which a waf plugin rule matched, per route, action (blocked, detected) and rule id.", []string{"route_id", "route", "action", "rule_id"}, nil)
)

func (c scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- recentLatencyDesc
	ch <- targetHealthyDesc
	ch <- streamActiveDesc
	ch <- streamTotalDesc
	ch <- routeRequestsDesc
	ch <- routeErrorsDesc
	ch <- consumerRequestsDesc
	ch <- rateLimitStoreUpDesc
	ch <- rateLimitFallbacksDesc
	ch <- otelExportedDesc
	ch <- otelDroppedDesc
	ch <- wafMatchesDesc
}

func (c scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	p50, p95, p99, count, sum := c.m.latency()
	ch <- prometheus.MustNewConstSummary(recentLatencyDesc, uint64(count), sum,
		map[float64]float64{0.5: p50 / 1000, 0.95: p95 / 1000, 0.99: p99 / 1000})
	for _, st := range c.m.live.Health().Statuses() {
		v := 1.0
		if st.State == "unhealthy" {
			v = 0
		}
		ch <- prometheus.MustNewConstMetric(targetHealthyDesc, prometheus.GaugeValue, v,
			strconv.FormatInt(st.ServiceID, 10), st.Host+":"+strconv.Itoa(st.Port))
	}
	for id, n := range c.m.live.Streams().AllCounts() {
		label := strconv.FormatInt(id, 10)
		ch <- prometheus.MustNewConstMetric(streamActiveDesc, prometheus.GaugeValue, float64(n.Active), label)
		ch <- prometheus.MustNewConstMetric(streamTotalDesc, prometheus.CounterValue, float64(n.Total), label)
	}
	for _, p := range []struct {
		policy string
		st     shared.Status
	}{{"redis", shared.RedisStatus()}, {"cluster", shared.PostgresStatus()}} {
		if p.st.Configured {
			up := 0.0
			if p.st.Up {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(rateLimitStoreUpDesc, prometheus.GaugeValue, up, p.policy)
		}
		ch <- prometheus.MustNewConstMetric(rateLimitFallbacksDesc, prometheus.CounterValue, float64(p.st.Fallbacks), p.policy)
	}
	c.m.collectCounts(ch)
	otel := opentelemetry.Counts()
	ch <- prometheus.MustNewConstMetric(otelExportedDesc, prometheus.CounterValue, float64(otel.Exported))
	ch <- prometheus.MustNewConstMetric(otelDroppedDesc, prometheus.CounterValue, float64(otel.DroppedQueueFull), "queue_full")
	ch <- prometheus.MustNewConstMetric(otelDroppedDesc, prometheus.CounterValue, float64(otel.DroppedExportFailed), "export_failed")
}

// collectCounts sends the per route and per consumer counters, labelled
// with the names the running configuration gives them. The counts are
// copied under the lock and sent after it: a slow scrape never holds up
// the requests being counted.
func (m *Metrics) collectCounts(ch chan<- prometheus.Metric) {
	rt := m.live.Router()
	if rt == nil {
		return
	}
	type count struct {
		id, requests, errors int64
		name                 string
	}
	type wafCount struct {
		wafKey
		n    int64
		name string
	}
	var routes, cons []count
	var wafs []wafCount
	m.mu.Lock()
	m.pruneBy(rt)
	for k, n := range m.waf {
		wafs = append(wafs, wafCount{k, n, rt.Table().Route(k.route).Name})
	}
	for id, rc := range m.routes {
		routes = append(routes, count{id, rc.requests, rc.errors, rt.Table().Route(id).Name})
	}
	for id, n := range m.consumers {
		cons = append(cons, count{id, n, 0, rt.ConsumerTable().ByID(id).Username})
	}
	m.mu.Unlock()
	for _, c := range routes {
		id := strconv.FormatInt(c.id, 10)
		ch <- prometheus.MustNewConstMetric(routeRequestsDesc, prometheus.CounterValue, float64(c.requests), id, c.name)
		ch <- prometheus.MustNewConstMetric(routeErrorsDesc, prometheus.CounterValue, float64(c.errors), id, c.name)
	}
	for _, c := range cons {
		ch <- prometheus.MustNewConstMetric(consumerRequestsDesc, prometheus.CounterValue, float64(c.requests), strconv.FormatInt(c.id, 10), c.name)
	}
	for _, c := range wafs {
		ch <- prometheus.MustNewConstMetric(wafMatchesDesc, prometheus.CounterValue, float64(c.n),
			strconv.FormatInt(c.route, 10), c.name, c.action, strconv.Itoa(c.rule))
	}
}
