package httplog

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/records"
	_ "github.com/caddy-gateway/gateway/modules/plugins/auth"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// The in-process Caddy of these tests is plugintest's.
func TestMain(m *testing.M) { plugintest.Main(m) }

func init() {
	// short grace and backoff so that tests see senders stop and retry
	senders.SetGrace(200 * time.Millisecond)
	senders.SetRetry(20*time.Millisecond, 100*time.Millisecond, 2*time.Second)
}

func TestConfig(t *testing.T) {
	plugintest.Config{
		Type: "http-log",
		Normalized: [][2]string{
			{`{"endpoint":"http://127.0.0.1:9/logs"}`,
				`{"endpoint":"http://127.0.0.1:9/logs","method":"POST","headers":{},"batch_max_size":100,"flush_interval_ms":1000,"timeout_ms":5000,"queue_max_size":10000}`},
			{`{"endpoint":"https://logs.example.com/x","method":"PUT","headers":{"Authorization":"Bearer t"},"batch_max_size":10000}`,
				`{"endpoint":"https://logs.example.com/x","method":"PUT","headers":{"Authorization":"Bearer t"},"batch_max_size":10000,"flush_interval_ms":1000,"timeout_ms":5000,"queue_max_size":10000}`},
		},
		Refused: map[string]string{
			`{}`:                                             "config.endpoint: is required",
			`{"endpoint":""}`:                                "config.endpoint: is required",
			`{"endpoint":"ftp://x/y"}`:                       "config.endpoint: must be an absolute http or https URL",
			`{"endpoint":"/relative"}`:                       "config.endpoint: must be an absolute http or https URL",
			`{"endpoint":"http://:9/x"}`:                     "config.endpoint: must have a host",
			`{"endpoint":"http://127.0.0.1:99999/"}`:         "config.endpoint: has port 99999",
			`{"endpoint":"http://127.1:9/x"}`:                "config.endpoint: host \"127.1\" must be an IPv4 address in standard form",
			`{"endpoint":"http://x","method":"GET"}`:         "config.method: must be one of",
			`{"endpoint":"http://x","batch_max_size":0}`:     "config.batch_max_size: must be at least 1",
			`{"endpoint":"http://x","batch_max_size":10001}`: "config.batch_max_size: must be at most 10000",
			`{"endpoint":"http://x","flush_interval_ms":0}`:  "config.flush_interval_ms: must be at least 1",
			`{"endpoint":"http://x","timeout_ms":0}`:         "config.timeout_ms: must be at least 1",
			`{"endpoint":"http://x","queue_max_size":0}`:     "config.queue_max_size: must be at least 1",
			`{"endpoint":"http://x","headers":{"a b":"c"}}`:  "config.headers.a b",
			`{"endpoint":"http://x","headers":{"a":1}}`:      "config.headers.a",
			`{"endpoint":"http://x","batch_size":1}`:         "config.batch_size: unknown field",
			`{"endpoint":"http://x","instance_id":1}`:        "config.instance_id: unknown field",
		},
		Caddyfile: [][2]string{
			{"gateway_http_log http://127.0.0.1:9/l {\n header X-A a\n headers X-B b\n method PUT\n timeout_ms 10\n}",
				`{"handler":"gateway_http_log","endpoint":"http://127.0.0.1:9/l","method":"PUT","headers":{"X-A":"a","X-B":"b"},"batch_max_size":100,"flush_interval_ms":1000,"timeout_ms":10,"queue_max_size":10000}`},
		},
		BadCaddyfile: []string{
			"gateway_http_log",
			"gateway_http_log http://127.0.0.1:9/l http://127.0.0.1:9/m",
			"gateway_http_log http://127.0.0.1:9/l {\n header X-A\n}",
			"gateway_http_log http://127.0.0.1:9/l {\n batch_max_size many\n}",
		},
	}.Check(t)
}

// collector is a log endpoint that records the batches it receives.
type collector struct {
	*httptest.Server
	mu      sync.Mutex
	batches [][]records.Record
	headers []http.Header
	methods []string
	delay   time.Duration
	status  int
}

func newCollector(t *testing.T, delay time.Duration) *collector {
	c := &collector{delay: delay, status: 200}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.delay > 0 {
			select {
			case <-time.After(c.delay):
			case <-r.Context().Done():
				return
			}
		}
		b, _ := io.ReadAll(r.Body)
		var batch []records.Record
		if err := json.Unmarshal(b, &batch); err != nil {
			t.Errorf("collector: body is not a JSON array of records: %v: %s", err, b)
		}
		c.mu.Lock()
		c.batches = append(c.batches, batch)
		c.headers = append(c.headers, r.Header.Clone())
		c.methods = append(c.methods, r.Method)
		status := c.status
		c.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) records() []records.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []records.Record
	for _, b := range c.batches {
		out = append(out, b...)
	}
	return out
}

func (c *collector) waitFor(t *testing.T, n int, within time.Duration) []records.Record {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := c.records()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector got %d records, want %d", len(got), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDelivery(t *testing.T) {
	col := newCollector(t, 0)
	list := []consumers.Consumer{{ID: 5, Username: "alice", Credentials: []consumers.Credential{{ID: 1, Type: "key-auth", Key: "ka"}}}}
	base := plugintest.Start(t, []any{
		map[string]any{"handler": "gateway_http_log", "endpoint": col.URL + "/ingest", "batch_max_size": 3,
			"flush_interval_ms": 50, "headers": map[string]string{"Authorization": "Bearer logs"}, "method": "PUT", "instance_id": 100},
		map[string]any{"handler": "gateway_key_auth", "consumers": list},
	}).URL

	for i := 0; i < 4; i++ {
		plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/ok?x=1", "apikey", "ka", "User-Agent", "tester/1"), 200)
	}
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/denied"), 401)
	got := col.waitFor(t, 5, 5*time.Second)
	if len(got) != 5 {
		t.Fatalf("%d records", len(got))
	}
	col.mu.Lock()
	for i, b := range col.batches {
		if len(b) > 3 {
			t.Errorf("batch of %d records", len(b))
		}
		if col.headers[i].Get("Authorization") != "Bearer logs" || col.headers[i].Get("Content-Type") != "application/json" || col.methods[i] != "PUT" {
			t.Errorf("batch request: %s %v", col.methods[i], col.headers[i])
		}
	}
	col.mu.Unlock()
	var last int64
	for i, r := range got {
		if r.ID <= last {
			t.Errorf("ids not increasing: %d after %d", r.ID, last)
		}
		last = r.ID
		if r.Method != "GET" || r.Scheme != "http" || !strings.HasPrefix(r.Host, "127.0.0.1:") || r.Time.IsZero() || r.LatencyMS <= 0 {
			t.Errorf("record %d: %+v", i, r)
		}
		if r.ClientIP == nil || *r.ClientIP != "127.0.0.1" {
			t.Errorf("client_ip %v", r.ClientIP)
		}
		if r.RouteID != nil || r.ServiceID != nil || r.RequestID != nil {
			t.Errorf("unknown fields must be null: %+v", r)
		}
		if r.Path == "/ok" {
			if r.Status != 200 || r.ConsumerID == nil || *r.ConsumerID != 5 || r.BytesSent == 0 || r.UserAgent == nil || *r.UserAgent != "tester/1" {
				t.Errorf("ok record: %+v", r)
			}
		} else if r.Path != "/denied" || r.Status != 401 || r.ConsumerID != nil {
			t.Errorf("denied record: %+v", r)
		}
	}
	// the records are JSON with every field present (nulls where unknown)
	col.mu.Lock()
	n := len(col.batches)
	col.mu.Unlock()
	if n < 2 {
		t.Errorf("%d batches for 5 records of max 3", n)
	}
}

func TestCollectorDown(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // connection refused from now on
	base := plugintest.Start(t, []any{map[string]any{"handler": "gateway_http_log", "endpoint": deadURL,
		"batch_max_size": 2, "flush_interval_ms": 10, "queue_max_size": 5, "timeout_ms": 200, "instance_id": 101}}).URL
	before := senders.Dropped()
	start := time.Now()
	for i := 0; i < 30; i++ {
		plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/"), 200)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("30 requests took %v with the collector down", el)
	}
	st := statsOf(t, "id:101")
	if st.Dropped == 0 || senders.Dropped()-before != st.Dropped {
		t.Fatalf("drops not counted: %+v (total %d)", st, senders.Dropped()-before)
	}
	if st.Queued > 5 {
		t.Fatalf("queue over its bound: %+v", st)
	}
	if st.Dropped+uint64(st.Queued) > 30 || st.Dropped < 30-5-2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSlowCollector(t *testing.T) {
	col := newCollector(t, 2*time.Second)
	base := plugintest.Start(t, []any{map[string]any{"handler": "gateway_http_log", "endpoint": col.URL,
		"batch_max_size": 1, "flush_interval_ms": 10, "queue_max_size": 3, "timeout_ms": 300, "instance_id": 102}}).URL
	start := time.Now()
	for i := 0; i < 20; i++ {
		res := plugintest.Do(t, "GET", base+"/")
		plugintest.WantStatus(t, res, 200)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("requests took %v with a slow collector", el)
	}
	if st := statsOf(t, "id:102"); st.Dropped == 0 {
		t.Fatalf("no drops: %+v", st)
	}
	// the sender times out and retries; nothing was delivered
	time.Sleep(400 * time.Millisecond)
	if st := statsOf(t, "id:102"); st.Sent != 0 {
		t.Fatalf("sent %+v", st)
	}
}

func statsOf(t *testing.T, key string) (out struct {
	Queued         int
	Dropped, Sent  uint64
	Failed, Sender uint64
}) {
	t.Helper()
	for _, s := range senders.Stats() {
		if s.Key == key {
			out.Queued, out.Dropped, out.Sent, out.Failed = s.Queued, s.Dropped, s.Sent, s.Failed
			return out
		}
	}
	t.Fatalf("no sender %s in %+v", key, senders.Stats())
	return out
}

func TestReloadKeepsQueueAndRemovalStops(t *testing.T) {
	col := newCollector(t, 0)
	cfg := map[string]any{"handler": "gateway_http_log", "endpoint": col.URL, "flush_interval_ms": 60000, "instance_id": 103}
	base := plugintest.Start(t, []any{cfg}).URL
	for i := 0; i < 3; i++ {
		plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/q"), 200)
	}
	if st := statsOf(t, "id:103"); st.Queued != 3 {
		t.Fatalf("queued %+v", st)
	}
	// reload: same sender, queue kept (the old config's cleanup releases it)
	plugintest.Start(t, []any{cfg})
	time.Sleep(300 * time.Millisecond) // past the grace period
	if st := statsOf(t, "id:103"); st.Queued != 3 || len(col.records()) != 0 {
		t.Fatalf("after reload %+v", st)
	}
	// a changed flush interval applies to the running sender at once
	cfg["flush_interval_ms"] = 20
	plugintest.Start(t, []any{cfg})
	if got := col.waitFor(t, 3, 3*time.Second); len(got) != 3 {
		t.Fatalf("%d records", len(got))
	}

	// the plugin disappears: its sender flushes and stops after the grace
	cfg["flush_interval_ms"] = 60000
	base = plugintest.Start(t, []any{cfg}).URL
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/last"), 200)
	n := senders.Len()
	plugintest.Start(t, nil) // no http-log
	got := col.waitFor(t, 4, 3*time.Second)
	if got[3].Path != "/last" {
		t.Fatalf("flushed %+v", got[3])
	}
	deadline := time.Now().Add(3 * time.Second)
	for senders.Len() >= n {
		if time.Now().After(deadline) {
			t.Fatalf("sender not stopped: %+v", senders.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRetry(t *testing.T) {
	col := newCollector(t, 0)
	col.mu.Lock()
	col.status = 503
	col.mu.Unlock()
	base := plugintest.Start(t, []any{map[string]any{"handler": "gateway_http_log", "endpoint": col.URL, "flush_interval_ms": 10, "instance_id": 104}}).URL
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/retry"), 200)
	time.Sleep(150 * time.Millisecond) // a few failed attempts
	col.mu.Lock()
	attempts := len(col.batches)
	col.batches = nil
	col.status = 200
	col.mu.Unlock()
	if attempts < 2 {
		t.Fatalf("%d attempts", attempts)
	}
	got := col.waitFor(t, 1, 3*time.Second)
	if got[0].Path != "/retry" {
		t.Fatalf("%+v", got[0])
	}
	if st := statsOf(t, "id:104"); st.Sent != 1 || st.Failed != 0 {
		t.Fatalf("%+v", st)
	}
}

// In the gateway the proxy server builds the record: the plugin only adds
// its sender to the request's sinks.
func TestGatewayMode(t *testing.T) {
	col := newCollector(t, 0)
	h := &HTTPLog{}
	h.SetDefaults()
	h.Endpoint = col.URL
	h.FlushIntervalMS = 10
	h.InstanceID = 105
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	defer h.Cleanup()
	info := &gwctx.Info{Start: time.Now(), RecordBuilt: true}
	r := gwctx.With(httptest.NewRequest("GET", "/g", nil), info)
	w := httptest.NewRecorder()
	called := false
	err := h.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		called = true
		w.WriteHeader(204)
		return nil
	}))
	if err != nil || !called || len(info.Sinks) != 1 || info.Sinks[0] != h.RecordSink() {
		t.Fatalf("err %v called %v sinks %d", err, called, len(info.Sinks))
	}
	// a router that registered the sink up front: not added twice
	info2 := &gwctx.Info{Start: time.Now(), RecordBuilt: true, Sinks: []records.Sink{h.RecordSink()}}
	_ = h.ServeHTTP(httptest.NewRecorder(), gwctx.With(httptest.NewRequest("GET", "/g", nil), info2), caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil }))
	if len(info2.Sinks) != 1 {
		t.Fatalf("%d sinks", len(info2.Sinks))
	}
	time.Sleep(50 * time.Millisecond)
	if len(col.records()) != 0 {
		t.Fatal("the plugin built a record in gateway mode")
	}
	info.Sinks[0].Enqueue(&records.Record{ID: 42, Path: "/g", Status: 204})
	if got := col.waitFor(t, 1, 2*time.Second); got[0].ID != 42 {
		t.Fatalf("%+v", got[0])
	}
	if h.Dropped() != 0 {
		t.Fatal("dropped")
	}
}

func TestCaddyfile(t *testing.T) {
	col := newCollector(t, 0)
	base := plugintest.StartCaddyfile(t, `
http://127.0.0.1:{PORT} {
	reverse_proxy {UP}
	gateway_key_auth {
		consumer bob {
			key kb
		}
	}
	gateway_http_log `+col.URL+` {
		header X-Log-Token abc
		batch_max_size 1
		flush_interval_ms 20
	}
}
`).URL
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/cf"), 401) // logged: http-log runs first
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/cf", "apikey", "kb"), 200)
	got := col.waitFor(t, 2, 3*time.Second)
	statuses := map[int]bool{got[0].Status: true, got[1].Status: true}
	if !statuses[401] || !statuses[200] {
		t.Fatalf("%+v", got)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.headers[0].Get("X-Log-Token") != "abc" {
		t.Fatal("header")
	}
}

// TestQueueHeldBytesBounded: with its collector down, a sender holds at
// most 64 MiB of records (queued or being sent), whatever queue_max_size
// allows; records beyond are dropped and counted, every one accounted for.
// Clients choose a record's largest fields: with a 2 KB path, a 256-byte
// host and user agent, queue_max_size's 1,000,000 records held ~3 GB.
func TestQueueHeldBytesBounded(t *testing.T) {
	hang := make(chan struct{})
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a collector that never answers, then fails
		case <-hang:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(col.Close)
	t.Cleanup(func() { close(hang) })
	base := plugintest.Start(t, []any{map[string]any{"handler": "gateway_http_log", "endpoint": col.URL,
		"batch_max_size": 100, "flush_interval_ms": 3600000, "timeout_ms": 600000, "queue_max_size": 1000000, "instance_id": 110}},
		plugintest.WithUpstreamFunc(func(http.ResponseWriter, *http.Request) {})).URL
	// the plugin goes away with the test: its sender gives its queue up
	t.Cleanup(func() { plugintest.Start(t, nil) })

	path := "/" + strings.Repeat("p", gwctx.MaxRecordPath-1)
	host := strings.Repeat("h", gwctx.MaxRecordShort)
	ua := strings.Repeat("u", gwctx.MaxRecordShort)
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	const n = 25000 // 64 MiB are ~23,500 such records
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Host = host
		req.Header.Set("User-Agent", ua)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	// A record is queued once its response is done, after the client
	// has it: wait until all n are accounted for (one batch of 100 is
	// at the collector, neither sent nor failed).
	var st struct {
		Queued         int
		Dropped, Sent  uint64
		Failed, Sender uint64
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st = statsOf(t, "id:110")
		if st.Queued+100+int(st.Dropped) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.Sent != 0 || st.Failed != 0 || st.Queued+100+int(st.Dropped) != n {
		t.Fatalf("%d records not accounted for: %+v", n, st)
	}
	// What the sender holds, counting only the client's strings.
	held := (st.Queued + 100) * (len(path) + len(host) + len(ua))
	if st.Dropped == 0 || held > 64<<20 {
		t.Fatalf("the sender holds %d records, %d MB of their paths, hosts and user agents alone; %d dropped", st.Queued+100, held>>20, st.Dropped)
	}
}
