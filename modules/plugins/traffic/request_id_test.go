package traffic

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/google/uuid"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestRequestIDTraffic(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-id", `{}`)})

	// generated: a UUIDv4, the same upstream and downstream
	res := g.Get("/a")
	plugintest.WantStatus(t, res, http.StatusOK)
	id := res.Header.Get("X-Request-ID")
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 4 || len(id) != 36 {
		t.Fatalf("X-Request-ID %q is not a UUIDv4", id)
	}
	if got := g.Upstream.Last().Header.Values("X-Request-Id"); len(got) != 1 || got[0] != id {
		t.Fatalf("upstream saw %q, want [%s]", got, id)
	}
	if id2 := g.Get("/a").Header.Get("X-Request-ID"); id2 == id {
		t.Fatal("two requests got the same id")
	}

	// trusted incoming id is kept
	res = g.Get("/b", "X-Request-ID", "client-id-1")
	if got := res.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "client-id-1" {
		t.Fatalf("downstream %q, want [client-id-1]", got)
	}
	if got := g.Upstream.Last().Header.Get("X-Request-ID"); got != "client-id-1" {
		t.Fatalf("upstream %q", got)
	}
	// an invalid incoming id is replaced
	res = g.Get("/b", "X-Request-ID", "has space")
	if _, err := uuid.Parse(res.Header.Get("X-Request-ID")); err != nil {
		t.Fatalf("invalid incoming id kept: %q", res.Header.Get("X-Request-ID"))
	}
}

func TestRequestIDNoTrustNoEcho(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-id", `{"header_name":"X-Corr","trust_incoming":false,"echo_downstream":false}`)},
		plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Corr", "from-upstream")
			w.WriteHeader(http.StatusOK)
		}))
	res := g.Get("/", "X-Corr", "client")
	plugintest.WantStatus(t, res, http.StatusOK)
	up := g.Upstream.Last().Header.Get("X-Corr")
	if _, err := uuid.Parse(up); err != nil {
		t.Fatalf("upstream got %q, want a fresh UUID", up)
	}
	if got := res.Header.Get("X-Corr"); got != "from-upstream" {
		t.Fatalf("echo_downstream false: response header %q, want the upstream's own", got)
	}
}

func TestRequestIDEchoReplacesUpstreamCopy(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-id", `{}`)},
		plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-ID", "upstream-own")
		}))
	res := g.Get("/", "X-Request-ID", "abc")
	if got := res.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "abc" {
		t.Fatalf("downstream ids %q, want [abc]", got)
	}
	// proxy errors (upstream down) still carry the id
	g.Upstream.Close()
	res = g.Get("/", "X-Request-ID", "abc")
	if res.StatusCode != http.StatusBadGateway || res.Header.Get("X-Request-ID") != "abc" {
		t.Fatalf("upstream down: status %d, id %q", res.StatusCode, res.Header.Get("X-Request-ID"))
	}
}

// TestNewUUID: generated ids are version 4, RFC 4122 variant, lower-case
// canonical text, and distinct.
func TestNewUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := newUUID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("%q is not a canonical UUIDv4", id)
		}
		if seen[id] {
			t.Fatalf("%q generated twice", id)
		}
		seen[id] = true
	}
}

// Without trust_incoming, the client's id spelled with '_' (read as the
// same header by CGI-style upstreams) does not go upstream either; with
// it, the header is the client's anyway and is left alone.
func TestRequestIDNoTrustDropsLookalikes(t *testing.T) {
	for _, trust := range []bool{false, true} {
		h := &RequestID{HeaderName: "X-Corr", TrustIncoming: trust}
		if err := h.Provision(caddy.Context{}); err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("x_corr", "client")
		up := upstreamHeader(t, h, r)
		if got := up["X_corr"]; (got != nil) != trust {
			t.Errorf("trust_incoming %v: the upstream got x_corr %q", trust, got)
		}
	}
}

// A header_name with '_' reaches CGI-style upstreams as the same variable
// as its dash spelling: without trust_incoming, the client's copies in
// either spelling do not go upstream, only the gateway's id does.
func TestRequestIDUnderscoreNameDropsDashSpelling(t *testing.T) {
	h := &RequestID{HeaderName: "X_Corr"}
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header["X-Corr"] = []string{"client"}
	r.Header["X_CORR"] = []string{"client"}
	r.Header["X_corr"] = []string{"client"}
	if up := upstreamHeader(t, h, r); len(up) != 1 || len(up["X_corr"]) != 1 || up["X_corr"][0] == "client" {
		t.Fatalf("the upstream got %v; want only the gateway's X_corr", up)
	}
}

// upstreamHeader serves r through h and returns the request header the
// next handler got.
func upstreamHeader(t *testing.T, h *RequestID, r *http.Request) (up http.Header) {
	t.Helper()
	next := caddyhttp.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) error {
		up = r.Header.Clone()
		return nil
	})
	if err := h.ServeHTTP(httptest.NewRecorder(), r, next); err != nil {
		t.Fatal(err)
	}
	return up
}
