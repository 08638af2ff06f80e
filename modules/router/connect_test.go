package router

import (
	"net/http"
	"testing"
)

// TestConnectAllowed: CONNECT is proxied only by a route listing it (any
// case), while WebSocket over HTTP/2 and HTTP/3 (extended CONNECT) is
// always proxied, as Caddy's proxy turns it into an upgrade.
func TestConnectAllowed(t *testing.T) {
	anyMethod, listed := &Route{}, &Route{Methods: []string{"GET", "connect"}}
	h1 := &http.Request{Method: "CONNECT", ProtoMajor: 1, Header: http.Header{}}
	h2ws := &http.Request{Method: "CONNECT", ProtoMajor: 2, Header: http.Header{":protocol": {"websocket"}}}
	h2other := &http.Request{Method: "CONNECT", ProtoMajor: 2, Header: http.Header{":protocol": {"connect-udp"}}}
	h3ws := &http.Request{Method: "CONNECT", ProtoMajor: 3, Proto: "websocket", Header: http.Header{}}
	for _, tc := range []struct {
		name  string
		route *Route
		r     *http.Request
		want  bool
	}{
		{"h1, any method", anyMethod, h1, false},
		{"h1, listed", listed, h1, true},
		{"h2 websocket", anyMethod, h2ws, true},
		{"h2 other protocol", anyMethod, h2other, false},
		{"h3 websocket", anyMethod, h3ws, true},
	} {
		if got := connectAllowed(tc.route, tc.r); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
