package observe

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/caddy-gateway/gateway/internal/gwctx"
)

// The traffic history kept for GET /api/v1/metrics/history: one point per
// HistoryStep for the last HistoryPoints steps (an hour), in memory, for
// the process (it outlives config reloads and starts empty with the
// process). Its size is fixed: HistoryPoints points of a fixed latency
// histogram, and at most HistoryKeys routes and HistoryKeys consumers each.
const (
	HistoryStep   = 10 * time.Second
	HistoryPoints = 360
	HistoryKeys   = 50
)

// Latency histogram of a point: bucket i holds latencies up to
// latencyBase·2^(i/latencyPerOctave) ms (about 19 % wide), from 10 µs to
// about 168 s; the last bucket also takes anything slower.
const (
	latencyBuckets   = 96
	latencyPerOctave = 4
	latencyBase      = 0.01 // ms
)

// History is the bounded traffic history: a ring of points indexed by the
// step number (Unix time / HistoryStep).
type History struct {
	started int64 // first step of the process

	mu     sync.Mutex
	lastID int64 // the newest request record counted
	ring   [HistoryPoints]historyPoint
}

type historyPoint struct {
	step      int64 // which step this slot holds; a stale slot is reset on use
	requests  int64
	unmatched int64
	classes   [5]int64
	latency   [latencyBuckets]uint32
	routes    map[int64]*keyCount
	consumers map[int64]*keyCount
	otherR    keyCount // routes beyond HistoryKeys
	otherC    keyCount // consumers beyond HistoryKeys
}

type keyCount struct {
	name             string
	requests, errors int64
}

// NewHistory returns an empty history starting now.
func NewHistory() *History {
	return &History{started: stepOf(time.Now())}
}

func stepOf(t time.Time) int64 { return t.Unix() / int64(HistoryStep/time.Second) }

// observe adds one completed request to the point of its step.
// id is the request record's id.
func (h *History) observe(now time.Time, info *gwctx.Info, status int, latency time.Duration, id int64) {
	step := stepOf(now)
	bucket := latencyBucket(float64(latency.Microseconds()) / 1000)
	isErr := status >= 500
	h.mu.Lock()
	h.lastID = max(h.lastID, id)
	p := &h.ring[step%HistoryPoints]
	if p.step != step {
		p.reset(step)
	}
	p.requests++
	if !info.Matched {
		p.unmatched++
	}
	if c := status/100 - 1; c >= 0 && c < 5 {
		p.classes[c]++
	}
	if p.latency[bucket] < math.MaxUint32 {
		p.latency[bucket]++
	}
	if info.Matched {
		count(p.routes, &p.otherR, info.RouteID, info.RouteName, isErr)
	}
	if c := info.Consumer; c != nil {
		count(p.consumers, &p.otherC, c.ID, c.Username, isErr)
	}
	h.mu.Unlock()
}

func (p *historyPoint) reset(step int64) {
	routes, consumers := p.routes, p.consumers
	if routes == nil {
		routes, consumers = map[int64]*keyCount{}, map[int64]*keyCount{}
	}
	clear(routes)
	clear(consumers)
	*p = historyPoint{step: step, routes: routes, consumers: consumers}
}

func count(m map[int64]*keyCount, other *keyCount, id int64, name string, isErr bool) {
	kc := m[id]
	if kc == nil {
		if len(m) >= HistoryKeys {
			kc = other
		} else {
			kc = &keyCount{}
			m[id] = kc
		}
	}
	if kc != other {
		kc.name = name // the latest name (a rename shows at once)
	}
	kc.requests++
	if isErr {
		kc.errors++
	}
}

func latencyBucket(ms float64) int {
	if ms <= latencyBase {
		return 0
	}
	i := int(math.Ceil(latencyPerOctave * math.Log2(ms/latencyBase)))
	return min(max(i, 0), latencyBuckets-1)
}

func latencyBound(i int) float64 {
	return latencyBase * math.Exp2(float64(i)/latencyPerOctave)
}

// HistoryAnswer is the answer of GET /api/v1/metrics/history.
type HistoryAnswer struct {
	StepS     int            `json:"step_s" doc:"Seconds per point (10)."`
	MaxPoints int            `json:"max_points" doc:"The most points kept (360: one hour)."`
	LastID    int64          `json:"last_id" doc:"The id of the newest request record the points count: events of GET /api/v1/events with a higher id come after this answer."`
	Points    []HistoryPoint `json:"points" doc:"Oldest first, one per step without gaps, from the process start or an hour ago up to the current (still filling) step."`
}

// HistoryPoint is what the requests completed in one step did.
type HistoryPoint struct {
	Time      time.Time         `json:"time" doc:"Start of the step (UTC)."`
	Requests  int64             `json:"requests"`
	Unmatched int64             `json:"unmatched" doc:"Requests that matched no route (404 from the proxy)."`
	Status    map[string]int64  `json:"status" doc:"Requests by status class: 1xx … 5xx."`
	LatencyMS LatencyMS         `json:"latency_ms" doc:"Percentiles of the step's requests, estimated from a histogram with buckets about 19 % wide (the bucket's upper bound); 0 without requests."`
	Routes    []HistoryRoute    `json:"routes" doc:"Requests and errors (status 500 or above) per route that had traffic in the step, by route id; at most 50 routes, the rest in other_routes."`
	Consumers []HistoryConsumer `json:"consumers" doc:"Requests and errors (status 500 or above) per authenticated consumer, by consumer id; at most 50, the rest in other_consumers."`
	OtherR    *HistoryCount     `json:"other_routes" doc:"Traffic of routes beyond the first 50 of the step; null when none."`
	OtherC    *HistoryCount     `json:"other_consumers" doc:"Traffic of consumers beyond the first 50 of the step; null when none."`
}

// HistoryRoute is one route's traffic in a step.
type HistoryRoute struct {
	RouteID   int64  `json:"route_id"`
	RouteName string `json:"route_name"`
	Requests  int64  `json:"requests"`
	Errors    int64  `json:"errors"`
}

// HistoryConsumer is one consumer's traffic in a step.
type HistoryConsumer struct {
	ConsumerID int64  `json:"consumer_id"`
	Username   string `json:"username"`
	Requests   int64  `json:"requests"`
	Errors     int64  `json:"errors"`
}

// HistoryCount is traffic beyond the per-step key limit.
type HistoryCount struct {
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
}

// Snapshot returns the points up to now, oldest first.
func (h *History) Snapshot(now time.Time) HistoryAnswer {
	last := stepOf(now)
	first := max(h.started, last-HistoryPoints+1)
	out := HistoryAnswer{StepS: int(HistoryStep / time.Second), MaxPoints: HistoryPoints, Points: make([]HistoryPoint, 0, last-first+1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	out.LastID = h.lastID
	for s := first; s <= last; s++ {
		pt := HistoryPoint{Time: time.Unix(s*int64(HistoryStep/time.Second), 0).UTC(), Status: map[string]int64{},
			Routes: []HistoryRoute{}, Consumers: []HistoryConsumer{}}
		for _, n := range classNames {
			pt.Status[n] = 0
		}
		if p := &h.ring[s%HistoryPoints]; p.step == s {
			p.export(&pt)
		}
		out.Points = append(out.Points, pt)
	}
	return out
}

func (p *historyPoint) export(pt *HistoryPoint) {
	pt.Requests, pt.Unmatched = p.requests, p.unmatched
	for i, n := range classNames {
		pt.Status[n] = p.classes[i]
	}
	pt.LatencyMS = LatencyMS{p.percentile(0.50), p.percentile(0.95), p.percentile(0.99)}
	for id, kc := range p.routes {
		pt.Routes = append(pt.Routes, HistoryRoute{id, kc.name, kc.requests, kc.errors})
	}
	sort.Slice(pt.Routes, func(i, j int) bool { return pt.Routes[i].RouteID < pt.Routes[j].RouteID })
	for id, kc := range p.consumers {
		pt.Consumers = append(pt.Consumers, HistoryConsumer{id, kc.name, kc.requests, kc.errors})
	}
	sort.Slice(pt.Consumers, func(i, j int) bool { return pt.Consumers[i].ConsumerID < pt.Consumers[j].ConsumerID })
	if p.otherR.requests > 0 {
		pt.OtherR = &HistoryCount{p.otherR.requests, p.otherR.errors}
	}
	if p.otherC.requests > 0 {
		pt.OtherC = &HistoryCount{p.otherC.requests, p.otherC.errors}
	}
}

// percentile is the upper bound of the bucket holding the q-quantile (the
// rank rule of the latency window: the ceil(q·n)-th smallest).
func (p *historyPoint) percentile(q float64) float64 {
	var n int64
	for _, c := range p.latency {
		n += int64(c)
	}
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i, c := range p.latency {
		seen += int64(c)
		if seen >= rank {
			return math.Round(latencyBound(i)*1000) / 1000
		}
	}
	return latencyBound(latencyBuckets - 1)
}
