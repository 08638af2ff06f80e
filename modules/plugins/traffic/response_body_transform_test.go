package traffic

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

const upstreamJSON = `{"user":{"name":"a","password":"p"},"items":[{"secret":1,"id":1},{"id":2}],"url":"http://internal.example/x","html":"<b>&</b>","n":1.50}`

// fixed answers body with content type ct (and Content-Length unless
// chunked), with an ETag.
func fixed(ct, body string, chunked bool, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		w.Header().Set("ETag", `"v1"`)
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write([]byte(body))
			return
		}
		for i := 0; i < len(body); i += 1000 {
			_, _ = w.Write([]byte(body[i:min(i+1000, len(body))]))
			w.(http.Flusher).Flush()
		}
	}
}

func bodyRulesConfig(extra string) string {
	return `{"replace":[{"pattern":"http://internal\\.example","with":"https://api.example.com"}],
	"json_remove":["user.password","items.0.secret","missing.path"],
	"json_set":{"user.name":"b","meta.gateway":true}` + extra + `}`
}

func TestResponseBodyTransformJSON(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", bodyRulesConfig(""))},
		plugintest.WithUpstreamFunc(fixed("application/json; charset=utf-8", upstreamJSON, false)))
	res := g.Get("/")
	plugintest.WantStatus(t, res, http.StatusOK)
	want := `{"user":{"name":"b"},"items":[{"id":1},{"id":2}],"url":"https://api.example.com/x","html":"<b>&</b>","n":1.50,"meta":{"gateway":true}}`
	if res.Body != want {
		t.Fatalf("body\n %s\nwant\n %s", res.Body, want)
	}
	if res.Header.Get("Content-Length") != strconv.Itoa(len(want)) || res.ContentLength != int64(len(want)) {
		t.Fatalf("Content-Length %q for %d bytes", res.Header.Get("Content-Length"), len(want))
	}
	if res.Header.Get("ETag") != "" {
		t.Fatal("changed body kept its ETag")
	}
	// HEAD passes untouched
	plugintest.WantStatus(t, g.Do(http.MethodHead, "/", nil), http.StatusOK)
}

func TestResponseBodyTransformText(t *testing.T) {
	page := `<a href="http://internal.example/a">x</a> {"user":{"password":"p"}}`
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", bodyRulesConfig(""))},
		plugintest.WithUpstreamFunc(fixed("text/html", page, true)))
	res := g.Get("/")
	want := `<a href="https://api.example.com/a">x</a> {"user":{"password":"p"}}` // JSON rules only for JSON
	if res.Body != want || res.ContentLength != int64(len(want)) {
		t.Fatalf("body %q (length %d), want %q", res.Body, res.ContentLength, want)
	}

	// not listed: streams through unchanged
	g = startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", bodyRulesConfig(""))},
		plugintest.WithUpstreamFunc(fixed("application/xml", "<u>http://internal.example</u>", false)))
	res = g.Get("/")
	if res.Body != "<u>http://internal.example</u>" || res.Header.Get("ETag") != `"v1"` {
		t.Fatalf("unlisted type changed: %q", res.Body)
	}

	// no match: the original, ETag kept
	g = startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", bodyRulesConfig(""))},
		plugintest.WithUpstreamFunc(fixed("text/plain", "nothing to see", false)))
	res = g.Get("/")
	if res.Body != "nothing to see" || res.Header.Get("ETag") != `"v1"` {
		t.Fatalf("unchanged body: %q, ETag %q", res.Body, res.Header.Get("ETag"))
	}
}

func TestResponseBodyTransformTooLarge(t *testing.T) {
	big := strings.Repeat("http://internal.example ", 500) // 12000 bytes
	for _, chunked := range []bool{false, true} {
		g := startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", bodyRulesConfig(`,"max_body_bytes":5000`))},
			plugintest.WithUpstreamFunc(fixed("text/plain", big, chunked)))
		res := g.Get("/")
		plugintest.WantStatus(t, res, http.StatusOK)
		if res.Body != big {
			t.Fatalf("chunked=%v: body over max_body_bytes changed (%d bytes)", chunked, len(res.Body))
		}
	}
	// within the limit, chunked: transformed
	small := strings.Repeat("http://internal.example ", 100)
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", bodyRulesConfig(`,"max_body_bytes":5000`))},
		plugintest.WithUpstreamFunc(fixed("text/plain", small, true)))
	if res := g.Get("/"); res.Body != strings.ReplaceAll(small, "http://internal.example", "https://api.example.com") {
		t.Fatalf("chunked body within the limit not transformed: %q", res.Body[:60])
	}
}

func gzipped(s string) string {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return buf.String()
}

func TestResponseBodyTransformCompressed(t *testing.T) {
	want := `{"user":{"name":"b"},"items":[{"id":1},{"id":2}],"url":"https://api.example.com/x","html":"<b>&</b>","n":1.50,"meta":{"gateway":true}}`
	// an upstream that compresses itself
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", bodyRulesConfig(""))},
		plugintest.WithUpstreamFunc(fixed("application/json", gzipped(upstreamJSON), false, "Content-Encoding", "gzip")))
	res := g.Get("/", "Accept-Encoding", "gzip")
	if res.Header.Get("Content-Encoding") != "gzip" || res.ContentLength != int64(len(res.Body)) {
		t.Fatalf("Content-Encoding %q, Content-Length %d for %d bytes", res.Header.Get("Content-Encoding"), res.ContentLength, len(res.Body))
	}
	if got := decoded(t, res); got != want {
		t.Fatalf("decoded body %s", got)
	}

	// the gateway's default ordering: body transform (1310) outside compression (1400)
	big := strings.Replace(upstreamJSON, `"n":1.50`, `"n":1.50,"pad":"`+strings.Repeat("z", 2000)+`"`, 1)
	g = startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", bodyRulesConfig("")), plugintest.HandlerJSON(t, "response-compression", `{}`)},
		plugintest.WithUpstreamFunc(fixed("application/json", big, false)))
	for _, enc := range []string{"zstd", "gzip", ""} {
		res = g.Get("/", "Accept-Encoding", enc)
		if res.Header.Get("Content-Encoding") != enc {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q", enc, res.Header.Get("Content-Encoding"))
		}
		got := decoded(t, res)
		if !strings.HasPrefix(got, `{"user":{"name":"b"},`) || !strings.HasSuffix(got, `"meta":{"gateway":true}}`) || strings.Contains(got, "internal.example") {
			t.Fatalf("%s: body not transformed: %.80s", enc, got)
		}
		if res.ContentLength != int64(len(res.Body)) {
			t.Fatalf("%s: Content-Length %d for %d bytes", enc, res.ContentLength, len(res.Body))
		}
	}
}

// TestResponseBodyTransformBounded: a body that the rules would make
// unboundedly large, or JSON nested deeper than the decoder follows, is sent
// unchanged instead of exhausting the process's memory or a goroutine's
// stack (both ended the gateway).
func TestResponseBodyTransformBounded(t *testing.T) {
	long := strings.Repeat("x", 65536)
	rules := func(extra string) string {
		return `{"replace":[{"pattern":"a","with":"` + long + `"}],"content_types":["text/plain"],"max_body_bytes":` + extra + `}`
	}
	// 1100 matches of a 64 KiB replacement: over 64 MiB.
	many := strings.Repeat("a", 1100)
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", rules("1048576"))},
		plugintest.WithUpstreamFunc(fixed("text/plain", many, false)))
	if res := g.Get("/"); res.Body != many || res.Header.Get("ETag") != `"v1"` {
		t.Fatalf("a body over 64 MiB once transformed: %d bytes, want the original %d", len(res.Body), len(many))
	}
	// Two matches in 100 KB (counted, within the bound): transformed.
	two := "a" + strings.Repeat("b", 100000) + "a"
	g = startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", rules("1048576"))},
		plugintest.WithUpstreamFunc(fixed("text/plain", two, false)))
	if res := g.Get("/"); res.Body != strings.ReplaceAll(two, "a", long) {
		t.Fatalf("two replacements: %d bytes, want %d", len(res.Body), 2*len(long)+100000)
	}

	// JSON nested 1 Mi levels deep: left alone (with a 64 MiB stack the
	// recursive decoder overflowed it, a fatal error).
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	deep := strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20)
	g = startGW(t, []string{plugintest.HandlerJSON(t, "response-body-transform", `{"json_remove":["a"],"max_body_bytes":4194304}`)},
		plugintest.WithUpstreamFunc(fixed("application/json", deep, false)))
	if res := g.Get("/"); res.Body != deep {
		t.Fatalf("deeply nested JSON changed: %d bytes", len(res.Body))
	}
}
