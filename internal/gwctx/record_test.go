package gwctx

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/consumers"
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

// appendHook appends its argument to a header (the order hooks ran in).
type appendHook struct{}

func (appendHook) ApplyHeader(hdr http.Header, args HookArgs) {
	hdr["Order"] = append(hdr["Order"], args.S)
}

// Header hooks run once, last registered first (as nested wrappers
// would), before the final or 101 status: not for 1xx, and also when the
// body, a copy or a flush comes without a status. A hook cannot join once
// the header is out; DropHooks forgets the hooks registered after a point.
func TestRecordingWriterHooks(t *testing.T) {
	for name, write := range map[string]func(*RecordingWriter){
		"WriteHeader": func(w *RecordingWriter) { w.WriteHeader(http.StatusEarlyHints); w.WriteHeader(http.StatusCreated) },
		"Write":       func(w *RecordingWriter) { _, _ = w.Write([]byte("x")) },
		"ReadFrom":    func(w *RecordingWriter) { _, _ = w.ReadFrom(strings.NewReader("x")) },
		"Flush":       func(w *RecordingWriter) { _ = http.NewResponseController(w).Flush() },
		"Switching":   func(w *RecordingWriter) { w.WriteHeader(http.StatusSwitchingProtocols) },
	} {
		rec := httptest.NewRecorder()
		w := NewRecordingWriter(rec)
		for _, s := range []string{"outer", "inner", "dropped"} {
			if !w.OnHeader(appendHook{}, HookArgs{S: s}) {
				t.Fatalf("%s: hook %s refused", name, s)
			}
		}
		w.DropHooks(2)
		write(w)
		_, _ = w.Write([]byte("y")) // no second run
		if got := rec.Header()["Order"]; strings.Join(got, ",") != "inner,outer" {
			t.Fatalf("%s: hooks ran %q, want inner then outer", name, got)
		}
		if w.OnHeader(appendHook{}, HookArgs{S: "late"}) {
			t.Fatalf("%s: a hook joined after the header was written", name)
		}
	}
	// A full writer refuses one more hook: the plugin wraps instead.
	w := NewRecordingWriter(httptest.NewRecorder())
	for i := range len(writerHooks{}.hooks) {
		if !w.OnHeader(appendHook{}, HookArgs{}) {
			t.Fatalf("hook %d refused before the writer is full", i+1)
		}
	}
	if w.OnHeader(appendHook{}, HookArgs{}) || w.Hooks() != len(writerHooks{}.hooks) {
		t.Fatalf("a hook beyond the writer's room was taken (%d hooks)", w.Hooks())
	}
	w.DropHooks(1)
	if !w.OnHeader(appendHook{}, HookArgs{}) {
		t.Fatal("a slot freed by DropHooks is not reused")
	}

	w = NewRecordingWriter(httptest.NewRecorder())
	vals := w.Values(2)
	if len(vals) != 2 || cap(vals[0:1:1]) != 1 || cap(vals) != 2 {
		t.Fatalf("Values(2): len %d cap %d", len(vals), cap(vals))
	}
	vals[0], vals[1] = "a", "b"
	// An append to a handed-out value (a header's values, h.Add) never
	// writes into the next plugin's.
	next := w.Values(2)
	next[0], next[1] = "c", "d"
	hdr := http.Header{"One": vals[1:2:2], "All": vals}
	hdr.Add("One", "appended")
	hdr.Add("All", "appended")
	_ = append(vals, "appended")
	if next[0] != "c" || next[1] != "d" || vals[0] != "a" || vals[1] != "b" {
		t.Fatalf("an append wrote into other values: %q %q", vals, next)
	}
	if more := w.Values(100); len(more) != 100 || vals[1] != "b" {
		t.Fatal("a request beyond the writer's room is allocated, not taken from it")
	}
	var none *RecordingWriter
	if none.OnHeader(appendHook{}, HookArgs{}) || none.Hooks() != 0 || len(none.Values(3)) != 3 {
		t.Fatal("a nil writer takes no hooks and allocates values")
	}
	none.DropHooks(0)
}
