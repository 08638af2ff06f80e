package router

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// The read timeout cuts a body that stalls, however long the response
// has been flowing before; a body that keeps coming is never cut.
func TestTransportReadTimeout(t *testing.T) {
	stall := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 5; i++ { // 500 ms of progress, over twice the timeout
			_, _ = io.WriteString(w, "tick\n")
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
		if r.URL.Path == "/stall" {
			<-stall
		}
	}))
	defer up.Close()
	defer close(stall) // before Close, which waits for the stalled handler
	tr := &Transport{HTTPTransport: reverseproxy.HTTPTransport{ReadTimeout: caddy.Duration(200 * time.Millisecond)}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := tr.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(path string) ([]byte, error) {
		req, _ := http.NewRequest("GET", up.URL+path, nil)
		res, err := tr.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		return io.ReadAll(res.Body)
	}
	if body, err := get("/flowing"); err != nil || len(body) != 25 {
		t.Fatalf("a body that keeps coming: %q, %v", body, err)
	}
	body, err := get("/stall")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || len(body) != 25 {
		t.Fatalf("a stalled body: %q, %v (want a timeout after 25 bytes)", body, err)
	}
}
