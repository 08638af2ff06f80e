package router

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// The read timeout applies to every upstream connection the transport
// dials, a unix socket's too (reverse_proxy dials unix targets through
// it): a unix-socket target that takes the request and never answers
// fails the round trip with the connection's deadline, not after as long
// as the target stalls.
func TestTransportReadTimeoutUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "gwsock") // short: socket paths are limited to ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "up.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stall := make(chan struct{})
	defer close(stall)
	go func() { // reads the request, then stalls without an answer
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				<-stall
			}()
		}
	}()

	tr := &Transport{HTTPTransport: reverseproxy.HTTPTransport{ReadTimeout: caddy.Duration(200 * time.Millisecond)}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := tr.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	// the transport's own dialer, to the unix address reverse_proxy
	// would pass it for a unix/ upstream
	dial := tr.Transport.DialContext
	client := &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, "unix", sock)
		}},
		Timeout: 10 * time.Second, // what fails the request without a read timeout
	}
	defer client.CloseIdleConnections()
	_, err = client.Get("http://upstream/")
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stalled unix-socket target: %v, want the read deadline's timeout", err)
	}
}
