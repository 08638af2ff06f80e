package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/app/observe"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/poll"
)

func TestRecentRequests(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("r", sid, testgw.Paths("/in"))
	g.Get("", "/in/one")
	g.Get("", "/out")
	var recs []map[string]any
	g.JSON("GET", "/api/v1/requests", nil, &recs)
	if len(recs) != 2 {
		t.Fatalf("records: %v", recs)
	}
	newest, older := recs[0], recs[1]
	if newest["path"] != "/out" || newest["status"] != 404.0 || newest["route_id"] != nil {
		t.Fatalf("unmatched record: %v", newest)
	}
	if older["path"] != "/in/one" || older["status"] != 200.0 || older["route_id"] != float64(rid) ||
		older["service_id"] != float64(sid) || older["target"] == nil || older["client_ip"] != "127.0.0.1" ||
		older["method"] != "GET" || older["scheme"] != "http" || older["id"].(float64) >= newest["id"].(float64) {
		t.Fatalf("proxied record: %v", older)
	}
	// Larger values are clamped to 500, however large (past int64 too).
	for q, n := range map[string]int{"?limit=0": 0, "?limit=1": 1, "?limit=9999": 2, "?limit=99999999999999999999999": 2} {
		var got []any
		if st := g.JSON("GET", "/api/v1/requests"+q, nil, &got); st != 200 || len(got) != n {
			t.Fatalf("%s: %d %v", q, st, got)
		}
	}
	for _, q := range []string{"?limit=-1", "?limit=x", "?limit=-99999999999999999999999", "?limit=1e3"} {
		st, body := g.Do("GET", "/api/v1/requests"+q, nil)
		wantError(t, st, body, 400, "limit")
	}
}

// readEvent reads the next data event of an SSE stream.
func readEvent(t *testing.T, sc *bufio.Scanner) (id string, rec map[string]any) {
	t.Helper()
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &rec); err != nil {
				t.Fatalf("event data: %v", err)
			}
			return id, rec
		}
	}
	t.Fatalf("stream ended: %v", sc.Err())
	return
}

func TestEventStream(t *testing.T) {
	g, sid := echoGateway(t)
	g.Route("r", sid, nil)
	tok := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)

	client := &http.Client{Timeout: 10 * time.Second}
	if resp, err := client.Get(g.AdminURL + "/api/v1/events"); err != nil || resp.StatusCode != 401 {
		t.Fatalf("events without a credential: %v %v", resp, err)
	}
	// access_token works on the event stream only.
	if resp, err := client.Get(g.AdminURL + "/api/v1/requests?access_token=" + tok); err != nil || resp.StatusCode != 401 {
		t.Fatalf("access_token outside /events: %v %v", resp, err)
	}
	resp, err := client.Get(g.AdminURL + "/api/v1/events?access_token=" + tok)
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %v %v", resp, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	g.Get("", "/first")
	g.Get("", "/second")
	id1, r1 := readEvent(t, sc)
	id2, r2 := readEvent(t, sc)
	if r1["path"] != "/first" || r2["path"] != "/second" || id1 == "" || id1 == id2 || r1["status"] != 200.0 {
		t.Fatalf("events: %s %v / %s %v", id1, r1, id2, r2)
	}
}

func TestMetrics(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("ok", sid, testgw.Paths("/ok"))
	dead := g.DeadService("dead")
	rdead := g.Route("dead", dead, testgw.Paths("/dead"))
	for i := 0; i < 3; i++ {
		g.Get("", "/ok")
	}
	g.Get("", "/dead")
	g.Get("", "/nowhere")

	m := g.Must("GET", "/api/v1/metrics", nil)
	status := m["status"].(map[string]any)
	if m["total_requests"] != 5.0 || m["unmatched_requests"] != 1.0 || status["2xx"] != 3.0 || status["4xx"] != 1.0 ||
		status["5xx"] != 1.0 || m["latency_window"] != 1024.0 {
		t.Fatalf("metrics: %v", m)
	}
	lat := m["latency_ms"].(map[string]any)
	if lat["p50"].(float64) <= 0 || lat["p99"].(float64) < lat["p50"].(float64) {
		t.Fatalf("latency: %v", lat)
	}
	routes := map[float64]map[string]any{}
	for _, r := range m["routes"].([]any) {
		rm := r.(map[string]any)
		routes[rm["route_id"].(float64)] = rm
	}
	if routes[float64(rid)]["requests"] != 3.0 || routes[float64(rid)]["errors"] != 0.0 || routes[float64(rdead)]["errors"] != 1.0 {
		t.Fatalf("route metrics: %v", routes)
	}

	resp, err := http.Get(g.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.LegacyValidation) // what promtool accepts
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics is not valid text exposition: %v", err)
	}
	for _, name := range []string{"gateway_requests_total", "gateway_responses_total", "gateway_unmatched_requests_total",
		"gateway_request_duration_seconds", "gateway_recent_latency_seconds", "gateway_route_requests_total",
		"gateway_route_errors_total", "gateway_target_healthy"} {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if v := fams["gateway_requests_total"].GetMetric()[0].GetCounter().GetValue(); v != 5 {
		t.Fatalf("gateway_requests_total = %v", v)
	}
	// Every series names its node (the id of GET /api/v1/cluster).
	node := controlplane.Current().NodeID()
	if !strings.Contains(string(body), fmt.Sprintf(`gateway_route_requests_total{node=%q,route="ok",route_id="%d"} 3`, node, rid)) {
		t.Fatalf("route series missing:\n%s", body)
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "node" && l.GetValue() == node }) {
				t.Fatalf("%s without the node label: %v", name, m)
			}
		}
	}
}

// TestMetricsFollowTheConfiguration: per route and per consumer counts
// carry the names the configuration gives now, and a deleted route or
// consumer leaves both GET /api/v1/metrics and /metrics (a gateway whose
// routes are renamed and deleted by automation would otherwise grow a
// stale series per change, for ever).
func TestMetricsFollowTheConfiguration(t *testing.T) {
	g, sid := echoGateway(t)
	keep := g.Route("keep", sid, testgw.Paths("/keep"))
	gone := g.Route("gone", sid, testgw.Paths("/gone"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": keep, "config": map[string]any{}})
	alice := g.Consumer("alice", map[string]any{"type": "key-auth", "key": "alice-key"})
	bob := g.Consumer("bob", map[string]any{"type": "key-auth", "key": "bob-key"})
	for _, key := range []string{"alice-key", "alice-key", "bob-key"} {
		if a := g.Proxy(t, "GET", "/keep", nil, "apikey", key); a.Status != 200 {
			t.Fatalf("GET /keep with %s: %d", key, a.Status)
		}
	}
	g.Get("", "/gone")
	prom := func() string {
		t.Helper()
		resp, err := http.Get(g.AdminURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	node := controlplane.Current().NodeID()
	series := func(name, idLabel string, id int64, label, value string, n int) string { // labels sorted, as exposed
		labels := []string{fmt.Sprintf("%s=%q", label, value), fmt.Sprintf("node=%q", node), fmt.Sprintf("%s=\"%d\"", idLabel, id)}
		slices.Sort(labels)
		return fmt.Sprintf("%s{%s} %d", name, strings.Join(labels, ","), n)
	}
	if body := prom(); !strings.Contains(body, series("gateway_route_requests_total", "route_id", gone, "route", "gone", 1)) ||
		!strings.Contains(body, series("gateway_consumer_requests_total", "consumer_id", bob, "consumer", "bob", 1)) {
		t.Fatalf("series before the changes:\n%s", body)
	}

	g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", keep), map[string]any{"name": "kept", "service_id": sid, "paths": []string{"/keep"}})
	g.Must("PUT", fmt.Sprintf("/api/v1/consumers/%d", alice), map[string]any{"username": "alicia"})
	if st, body := g.Do("DELETE", fmt.Sprintf("/api/v1/routes/%d", gone), nil); st != 200 {
		t.Fatalf("delete route: %d %s", st, body)
	}
	if st, body := g.Do("DELETE", fmt.Sprintf("/api/v1/consumers/%d", bob), nil); st != 200 {
		t.Fatalf("delete consumer: %d %s", st, body)
	}

	body := prom()
	for _, want := range []string{
		series("gateway_route_requests_total", "route_id", keep, "route", "kept", 3),
		series("gateway_route_errors_total", "route_id", keep, "route", "kept", 0),
		series("gateway_consumer_requests_total", "consumer_id", alice, "consumer", "alicia", 2),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, stale := range []string{`route="keep"`, `route="gone"`, `consumer="alice"`, `consumer="bob"`,
		fmt.Sprintf("route_id=%q", fmt.Sprint(gone)), fmt.Sprintf("consumer_id=%q", fmt.Sprint(bob))} {
		if strings.Contains(body, stale) {
			t.Errorf("/metrics still has a series with %s", stale)
		}
	}
	if t.Failed() {
		t.Fatalf("/metrics:\n%s", body)
	}
	var m observe.MetricsSnapshot
	g.JSON("GET", "/api/v1/metrics", nil, &m)
	if len(m.Routes) != 1 || m.Routes[0] != (observe.RouteMetrics{RouteID: keep, Requests: 3}) ||
		len(m.Consumers) != 1 || m.Consumers[0] != (observe.ConsumerMetric{ConsumerID: alice, Requests: 2}) || m.TotalRequests != 4 {
		t.Fatalf("GET /api/v1/metrics after the changes: %+v", m)
	}
}

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

// TestHTTPLogThroughTheGateway: request records of every request of the
// route (also those a plugin before http-log answered) reach a collector in
// JSON batches with the gateway's fields; a dead collector does not slow
// proxied traffic.
func TestHTTPLogThroughTheGateway(t *testing.T) {
	g := testgw.Start(t, nil)
	var mu sync.Mutex
	var records []map[string]any
	collector := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		var batch []map[string]any
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			t.Errorf("collector got a non-array body: %v", err)
		}
		mu.Lock()
		records = append(records, batch...)
		mu.Unlock()
	})

	sid := g.Service("s", testgw.Addr(testgw.Echo(t, "up")))
	rid := g.Route("logged", sid, testgw.Paths("/logged"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "global",
		"config": map[string]any{"endpoint": collector.URL, "flush_interval_ms": 50, "batch_max_size": 10}})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-id", "scope": "global"})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": rid})
	cons := g.Consumer("alice", map[string]any{"type": "key-auth", "key": "k1"})

	g.WantGet("", "/logged/denied", 401) // without a key
	if a := g.Proxy(t, "GET", "/logged/ok", nil, "apikey", "k1"); a.Status != 200 {
		t.Fatalf("with key: %d %s", a.Status, a.Body)
	}

	poll.Until(t, "two records at the collector", func() bool { mu.Lock(); defer mu.Unlock(); return len(records) >= 2 })
	mu.Lock()
	byPath := map[string]map[string]any{}
	for _, r := range records {
		byPath[r["path"].(string)] = r
	}
	mu.Unlock()
	denied, ok := byPath["/logged/denied"], byPath["/logged/ok"]
	if denied == nil || denied["status"] != 401.0 {
		t.Fatalf("the 401 answered by key-auth was not logged: %v", byPath)
	}
	if ok == nil || ok["status"] != 200.0 || ok["route_id"] != float64(rid) || ok["service_id"] != float64(sid) ||
		ok["consumer_id"] != float64(cons) || ok["target"] == nil || ok["request_id"] == nil || ok["id"] == nil {
		t.Fatalf("record of the proxied request: %v", ok)
	}

	// Collector down: proxied requests are unaffected.
	collector.Close()
	start := time.Now()
	for i := 0; i < 50; i++ {
		if a := g.Proxy(t, "GET", "/logged/ok", nil, "apikey", "k1"); a.Status != 200 {
			t.Fatalf("with the collector down: %d %s", a.Status, a.Body)
		}
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("50 requests took %v with the collector down", el)
	}
}

// TestRecordFieldsBounded: a client without an account controls a record's
// method, host, path and user agent, each up to the proxy's 1 MB header
// limit. Kept whole, the 500 recent records alone would hold about 500 MB
// (and every event-stream subscriber's buffer and http-log queue more): a
// record keeps at most gwctx's bounds of each, cut at a UTF-8 boundary.
func TestRecordFieldsBounded(t *testing.T) {
	// Go's header limit rather than the default (Caddy's 16 KiB), so that
	// the record is what bounds the fields.
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"max_header_bytes": 1 << 20}})
	g.Route("r", g.Service("s", testgw.Addr(testgw.Echo(t, "up"))), nil)
	longPath := "/" + strings.Repeat("é", 100_000) // 600 kB percent-encoded (414: the router matches at most router.MaxPathBytes)
	longUA := strings.Repeat("u", 150_000)
	longHost := strings.Repeat("h", 100_000) + ".example"
	if p := send(t, g, "GET", longPath, nil, "User-Agent", longUA, "Host", longHost); p.Status != 414 {
		t.Fatalf("proxied: %d %.200s", p.Status, p.Body)
	}
	if p := send(t, g, strings.Repeat("M", 200_000), "/x", nil); p.Status == 0 {
		t.Fatal("no answer")
	}
	var recs []map[string]any
	g.JSON("GET", "/api/v1/requests", nil, &recs)
	if len(recs) != 2 {
		t.Fatalf("records: %d", len(recs))
	}
	method, _ := recs[0]["method"].(string)
	path, _ := recs[1]["path"].(string)
	ua, _ := recs[1]["user_agent"].(string)
	host, _ := recs[1]["host"].(string)
	if len(method) == 0 || len(method) > gwctx.MaxRecordShort || strings.Trim(method, "M") != "" {
		t.Fatalf("method: %d bytes", len(method))
	}
	if len(path) == 0 || len(path) > gwctx.MaxRecordPath || !strings.HasPrefix(longPath, path) {
		t.Fatalf("path: %d bytes, a prefix of the request's: %v", len(path), strings.HasPrefix(longPath, path))
	}
	if len(ua) == 0 || len(ua) > gwctx.MaxRecordShort || !strings.HasPrefix(longUA, ua) {
		t.Fatalf("user_agent: %d bytes", len(ua))
	}
	if len(host) == 0 || len(host) > gwctx.MaxRecordShort || !strings.HasPrefix(longHost, host) {
		t.Fatalf("host: %d bytes", len(host))
	}
}

// TestEventStreamsPerCaller: every event stream is a goroutine and a
// buffer that each proxied request is handed to under one lock, so one
// caller holds at most observe.MaxStreamsPerCaller at once: one more ends
// the caller's oldest (the endpoint's statuses stay 200 and 401), and
// other callers keep theirs.
func TestEventStreamsPerCaller(t *testing.T) {
	g, sid := echoGateway(t)
	g.Route("r", sid, nil)
	tok := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	g.Header.Set("Authorization", "Bearer "+tok)
	g.Must("POST", "/api/v1/users", map[string]any{"email": "viewer@example.com", "role": "viewer", "password": "viewer-pass"})
	viewer := g.Login("viewer@example.com", "viewer-pass")

	open := func(hdr http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", g.AdminURL+"/api/v1/events?access_token="+tok, nil)
		if hdr != nil {
			req.URL.RawQuery = ""
			for k, v := range hdr {
				req.Header[k] = v
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("event stream: %d", resp.StatusCode)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	other := open(viewer)
	var streams []*http.Response
	for i := 0; i <= observe.MaxStreamsPerCaller; i++ {
		streams = append(streams, open(nil))
	}
	// The oldest of the token's streams ended when the 17th opened: its
	// body ends after the opening comment.
	ended := make(chan string, 1)
	go func() {
		b, err := io.ReadAll(streams[0].Body)
		ended <- fmt.Sprintf("%q, %v", b, err)
	}()
	select {
	case got := <-ended:
		if got != fmt.Sprintf("%q, %v", ": stream of completed requests\n\n", nil) {
			t.Fatalf("the oldest stream: %s", got)
		}
	case <-time.After(30 * time.Second): // a bound on a failing run only
		t.Fatal("the oldest stream stayed open")
	}
	// The streams still open keep receiving, the other caller's too.
	g.Get("", "/after")
	for _, resp := range []*http.Response{streams[1], streams[observe.MaxStreamsPerCaller], other} {
		if _, rec := readEvent(t, bufio.NewScanner(resp.Body)); rec["path"] != "/after" {
			t.Fatalf("event: %v", rec)
		}
	}
}
