package tests

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

// TestHTTPLogThroughTheGateway: request records of every request of the
// route (also those a plugin before http-log answered) reach a collector in
// JSON batches with the gateway's fields; a dead collector does not slow
// proxied traffic.
func TestHTTPLogThroughTheGateway(t *testing.T) {
	g := testgw.Start(t, nil)
	var mu sync.Mutex
	var records []map[string]any
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []map[string]any
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			t.Errorf("collector got a non-array body: %v", err)
		}
		mu.Lock()
		records = append(records, batch...)
		mu.Unlock()
	}))
	defer collector.Close()

	sid := g.Service("s", addr(echo(t, "up")))
	rid := g.Route("logged", sid, testgw.Paths("/logged"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "global",
		"config": map[string]any{"endpoint": collector.URL, "flush_interval_ms": 50, "batch_max_size": 10}})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-id", "scope": "global"})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": rid})
	cons := g.Consumer("alice", map[string]any{"type": "key-auth", "key": "k1"})

	if st, _, _ := g.Get("", "/logged/denied"); st != 401 {
		t.Fatalf("without key: %d", st)
	}
	if a := g.Proxy(t, "GET", "/logged/ok", nil, "apikey", "k1"); a.Status != 200 {
		t.Fatalf("with key: %d %s", a.Status, a.Body)
	}

	waitFor(t, "two records at the collector", func() bool { mu.Lock(); defer mu.Unlock(); return len(records) >= 2 })
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
