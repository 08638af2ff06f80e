package traffic

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// chunked is a body of n bytes without a declared length (sent chunked).
func chunked(n int) io.Reader { return io.LimitReader(neverEnding('x'), int64(n)) }

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestRequestSizeLimitDeclared(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-size-limit", `{"max_bytes":100}`)})
	res := g.Do(http.MethodPost, "/", strings.NewReader(strings.Repeat("a", 100)))
	plugintest.WantStatus(t, res, http.StatusOK)
	if got := len(g.Upstream.Last().Body); got != 100 {
		t.Fatalf("upstream got %d bytes", got)
	}
	res = g.Do(http.MethodPost, "/", strings.NewReader(strings.Repeat("a", 101)))
	plugintest.WantStatus(t, res, http.StatusRequestEntityTooLarge)
	plugintest.WantErrorBody(t, res, "request body too large")
	if n := len(g.Upstream.Requests()); n != 1 {
		t.Fatalf("oversized declared body reached the upstream (%d requests)", n)
	}
	plugintest.WantStatus(t, g.Get("/"), http.StatusOK) // no body
}

func TestRequestSizeLimitStreamed(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-size-limit", `{"max_bytes":65536}`)})
	res := g.Do(http.MethodPost, "/small", chunked(1000))
	plugintest.WantStatus(t, res, http.StatusOK)
	if up := g.Upstream.Last(); len(up.Body) != 1000 || up.BodyErr != "" || len(up.Header.Values("Content-Length")) != 0 {
		t.Fatalf("upstream got %d bytes, error %q, header %v", len(up.Body), up.BodyErr, up.Header)
	}

	res = g.Do(http.MethodPost, "/big", chunked(4<<20))
	plugintest.WantStatus(t, res, http.StatusRequestEntityTooLarge)
	plugintest.WantErrorBody(t, res, "request body too large")
	// the upstream, if the request got that far, never saw a complete body
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		reqs := g.Upstream.Requests()
		if len(reqs) == 2 {
			if up := reqs[1]; up.BodyErr == "" || len(up.Body) > 65536 {
				t.Fatalf("upstream read %d bytes, error %q", len(up.Body), up.BodyErr)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Log("the cut-off request never reached the upstream handler")
}

func TestRequestSizeLimitZero(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-size-limit", `{"max_bytes":0}`)})
	plugintest.WantStatus(t, g.Get("/"), http.StatusOK)
	plugintest.WantStatus(t, g.Do(http.MethodPost, "/", strings.NewReader("a")), http.StatusRequestEntityTooLarge)
	plugintest.WantStatus(t, g.Do(http.MethodPost, "/", chunked(10)), http.StatusRequestEntityTooLarge)
}
