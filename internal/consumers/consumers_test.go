package consumers

import (
	"net/http"
	"slices"
	"testing"
)

func TestStripHeadersLookalikes(t *testing.T) {
	h := http.Header{}
	for _, k := range []string{
		"X-Consumer-Username", "X-Consumer-ID",
		"X_Consumer_Username", "x_consumer_id", "X-Consumer_Custom-ID", "X_CONSUMER_GROUPS",
	} {
		h[http.CanonicalHeaderKey(k)] = []string{"forged"} // as net/http reads it
	}
	keep := []string{"X_Consumer_Usernames", "X_Consumer", "X-Other_Header", "Accept"}
	for i, k := range keep {
		keep[i] = http.CanonicalHeaderKey(k)
		h[keep[i]] = []string{"kept"}
	}
	StripHeaders(h)
	var got []string
	for k := range h {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(keep)
	if !slices.Equal(got, keep) {
		t.Errorf("after StripHeaders: %v, want %v", got, keep)
	}
}

func TestStripHeadersAllocs(t *testing.T) {
	h := http.Header{
		"Accept":          {"*/*"},
		"User-Agent":      {"test"},
		"X-Consumer-Id":   {"1"},
		"Accept-Encoding": {"gzip"},
	}
	allocs := testing.AllocsPerRun(100, func() {
		h["X-Consumer-Id"] = h["Accept"]
		StripHeaders(h)
	})
	if allocs != 0 {
		t.Errorf("StripHeaders allocates %v times per request", allocs)
	}
}

func TestSetHeadersReplacesClientCopies(t *testing.T) {
	h := http.Header{"X-Consumer-Username": {"forged"}}
	SetHeaders(h, &Consumer{ID: 7, Username: "alice", Groups: []string{"a", "b"}}, nil)
	if got := h.Get(HeaderUsername); got != "alice" {
		t.Errorf("%s = %q, want alice", HeaderUsername, got)
	}
	if got := h.Get(HeaderID); got != "7" {
		t.Errorf("%s = %q, want 7", HeaderID, got)
	}
	if got := h.Get(HeaderGroups); got != "a,b" {
		t.Errorf("%s = %q, want a,b", HeaderGroups, got)
	}
}
