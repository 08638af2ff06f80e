package tests

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
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
	for q, n := range map[string]int{"?limit=0": 0, "?limit=1": 1, "?limit=9999": 2} {
		var got []any
		if st := g.JSON("GET", "/api/v1/requests"+q, nil, &got); st != 200 || len(got) != n {
			t.Fatalf("%s: %d %v", q, st, got)
		}
	}
	for _, q := range []string{"?limit=-1", "?limit=x"} {
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
