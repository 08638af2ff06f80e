package apps_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

type probeAnswer struct {
	Reachable bool   `json:"reachable"`
	Status    *int   `json:"status"`
	LatencyMS *int64 `json:"latency_ms"`
	Message   string `json:"message"`
}

func probe(t *testing.T, g *testgw.Gateway, u string) probeAnswer {
	t.Helper()
	var out probeAnswer
	if st := g.JSON("POST", "/api/v1/applications/test-upstream", map[string]any{"upstream_url": u}, &out); st != 200 {
		t.Fatalf("test-upstream %s: status %d", u, st)
	}
	if out.LatencyMS == nil || *out.LatencyMS < 0 || out.Message == "" {
		t.Fatalf("test-upstream %s: %+v", u, out)
	}
	return out
}

func TestUpstreamProbe(t *testing.T) {
	g := testgw.Start(t, nil)
	version := func() any { return g.Must("GET", "/api/v1/config", nil)["version"] }
	v0 := version()

	var hits, followed atomic.Int32
	target := testgw.Upstream(t, func(http.ResponseWriter, *http.Request) { followed.Add(1) })
	release := make(chan struct{})
	live := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/":
			if r.Header.Get("X-Probe") != "" {
				w.WriteHeader(500)
				return
			}
			// Headers at once, then a body that never ends: the probe
			// must answer without reading it.
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
		}
	})
	defer close(release)
	redirecting := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusFound)
	})

	start := time.Now()
	p := probe(t, g, live.URL)
	if !p.Reachable || p.Status == nil || *p.Status != 200 || hits.Load() != 1 {
		t.Fatalf("live upstream: %+v (hits %d)", p, hits.Load())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the probe waited %s: it read the body", d)
	}

	p = probe(t, g, redirecting.URL+"/")
	if !p.Reachable || p.Status == nil || *p.Status != 302 || followed.Load() != 0 {
		t.Fatalf("redirecting upstream: %+v (followed %d)", p, followed.Load())
	}

	// A closed port.
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	p = probe(t, g, closedURL)
	if p.Reachable || p.Status != nil || !strings.Contains(p.Message, "refused") {
		t.Fatalf("closed port: %+v", p)
	}

	// A TLS upstream whose certificate nobody trusts.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer tlsSrv.Close()
	p = probe(t, g, tlsSrv.URL)
	if p.Reachable || p.Status != nil || !strings.Contains(p.Message, "certificate") {
		t.Fatalf("untrusted TLS: %+v", p)
	}

	// Plain HTTP spoken to with TLS.
	p = probe(t, g, strings.Replace(redirecting.URL, "http://", "https://", 1))
	if p.Reachable || p.Status != nil || !strings.Contains(p.Message, "TLS") {
		t.Fatalf("https to a plain HTTP server: %+v", p)
	}

	// Validation: like upstream_url of an application; nothing else allowed.
	for _, body := range []any{
		map[string]any{},
		map[string]any{"upstream_url": ""},
		map[string]any{"upstream_url": "ftp://127.0.0.1"},
		map[string]any{"upstream_url": "http://127.0.0.1/path"},
		map[string]any{"upstream_url": "http://u:p@127.0.0.1"},
	} {
		g.WantError(400, "POST", "/api/v1/applications/test-upstream", body, "upstream_url")
	}
	g.WantError(400, "POST", "/api/v1/applications/test-upstream", map[string]any{"upstream_url": live.URL, "method": "HEAD"}, "method")

	if v := version(); v != v0 {
		t.Fatalf("probing changed the configuration version: %v -> %v", v0, v)
	}
	if got := counts(t, g); got != "services=0 routes=0 plugins=0" {
		t.Fatalf("probing stored something: %s", got)
	}
}

// TestUpstreamProbeTimeout: an upstream that accepts and never answers is
// reported unreachable after the 5-second timeout.
func TestUpstreamProbeTimeout(t *testing.T) {
	g := testgw.Start(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the listener closes
		}
	}()
	start := time.Now()
	p := probe(t, g, "http://"+ln.Addr().String())
	d := time.Since(start)
	if p.Reachable || p.Status != nil || !strings.Contains(p.Message, "5 seconds") {
		t.Fatalf("silent upstream: %+v", p)
	}
	if d < 4500*time.Millisecond || d > 8*time.Second || *p.LatencyMS < 4500 {
		t.Fatalf("silent upstream answered after %s (latency_ms %d), want about 5 s", d, *p.LatencyMS)
	}
}
