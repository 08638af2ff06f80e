package gwctx

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/modules/consumers"
)

// The writer keeps the final status after 1xx answers and counts the body
// whether it is written or copied (ReadFrom).
func TestRecordingWriter(t *testing.T) {
	got := make(chan *RecordingWriter, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := NewRecordingWriter(rw)
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("abc"))
		_, _ = w.ReadFrom(strings.NewReader("defgh"))
		got <- w
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if w := <-got; w.Status != http.StatusCreated || w.Bytes != 8 || resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d bytes %d (client got %d), want 201 and 8", w.Status, w.Bytes, resp.StatusCode)
	}
	implicit := NewRecordingWriter(httptest.NewRecorder())
	_, _ = implicit.Write([]byte("x"))
	if implicit.Status != http.StatusOK {
		t.Fatalf("a body without WriteHeader is 200, got %d", implicit.Status)
	}
}

// A record says what the gateway knew of the request; a status the gateway
// answered itself (Info.Status) stands in when nothing was written.
func TestNewRecord(t *testing.T) {
	r := httptest.NewRequest("GET", "https://api.example/p?q=1", nil)
	r.TLS = &tls.ConnectionState{}
	r.Header.Set("User-Agent", "ua")
	start := time.Now()
	info := &Info{Start: start, Matched: true, RouteID: 3, ServiceID: 4, ClientIP: "192.0.2.1",
		Target: "127.0.0.1:9", RequestID: "rid", Consumer: &consumers.Consumer{ID: 5}, Status: 429}
	rc := NewRecord(r, info, 0, 7, start.Add(1500*time.Microsecond))
	if rc.Status != 429 || rc.Scheme != "https" || rc.Path != "/p" || rc.Host != "api.example" || rc.BytesSent != 7 || rc.LatencyMS != 1.5 {
		t.Fatalf("record: %+v", rc)
	}
	if *rc.RouteID != 3 || *rc.ServiceID != 4 || *rc.ConsumerID != 5 || *rc.ClientIP != "192.0.2.1" ||
		*rc.Target != "127.0.0.1:9" || *rc.RequestID != "rid" || *rc.UserAgent != "ua" {
		t.Fatalf("record references: %+v", rc)
	}
	unmatched := NewRecord(httptest.NewRequest("GET", "/", nil), &Info{Start: start}, 404, 0, start)
	if unmatched.RouteID != nil || unmatched.ServiceID != nil || unmatched.Target != nil || unmatched.UserAgent != nil {
		t.Fatalf("unmatched record: %+v", unmatched)
	}
	if a, b := NextRecordID(), NextRecordID(); b <= a {
		t.Fatalf("record ids %d then %d", a, b)
	}
}
