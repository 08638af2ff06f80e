package proxycache

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
	"github.com/caddy-gateway/gateway/modules/plugins/proxycache/cachestore"
)

// The in-process Caddy of these tests is plugintest's.
func TestMain(m *testing.M) { plugintest.Main(m) }

func TestConfig(t *testing.T) {
	plugintest.Config{
		Type: "proxy-cache",
		Normalized: [][2]string{
			{`{}`, `{"ttl_s":300,"methods":["GET","HEAD"],"status_codes":[200,301,404],"content_types":[],"max_body_bytes":1048576,"vary_headers":[],"honor_cache_control":true,"cache_cookie_requests":false}`},
			{`{"honor_cache_control":false,"content_types":["application/json","text/*"],"status_codes":[200]}`,
				`{"ttl_s":300,"methods":["GET","HEAD"],"status_codes":[200],"content_types":["application/json","text/*"],"max_body_bytes":1048576,"vary_headers":[],"honor_cache_control":false,"cache_cookie_requests":false}`},
		},
		Refused: map[string]string{
			`{"ttl_s":0}`:                      "config.ttl_s: must be at least 1",
			`{"methods":[]}`:                   "config.methods",
			`{"methods":["get"]}`:              "config.methods[0]",
			`{"status_codes":[99]}`:            "config.status_codes[0]",
			`{"status_codes":["200"]}`:         "config.status_codes[0]: must be an integer",
			`{"content_types":["json"]}`:       "config.content_types[0]",
			`{"max_body_bytes":-1}`:            "config.max_body_bytes: must be at least 0",
			`{"vary_headers":["a b"]}`:         "config.vary_headers[0]",
			`{"ttl":60}`:                       "config.ttl: unknown field",
			`{"instance_id":1}`:                "config.instance_id: unknown field",
			`{"honor_cache_control":"true"}`:   "config.honor_cache_control: must be a boolean",
			`{"honor_cache_control":null}`:     "config.honor_cache_control: must not be null",
			`{"vary_headers":["X"],"bad":[1]}`: "config.bad: unknown field",
		},
		Caddyfile: [][2]string{
			{"gateway_proxy_cache 30 {\n status_codes 200 203\n honor_cache_control false\n vary_headers Accept\n}",
				`{"handler":"gateway_proxy_cache","ttl_s":30,"methods":["GET","HEAD"],"status_codes":[200,203],"content_types":[],"max_body_bytes":1048576,"vary_headers":["Accept"],"honor_cache_control":false,"cache_cookie_requests":false}`},
		},
		BadCaddyfile: []string{
			"gateway_proxy_cache 30 60",
			"gateway_proxy_cache {\n status_codes ok\n}",
			"gateway_proxy_cache {\n honor_cache_control maybe\n}",
			"gateway_proxy_cache {\n ttl 60\n}",
		},
	}.Check(t)
}

// originHeaders is the header origin sets per path (Content-Type replaces
// its default).
var originHeaders = map[string][2]string{
	"/nostore": {"Cache-Control", "no-store"},
	"/private": {"Cache-Control", "private, max-age=60"},
	"/nocache": {"Cache-Control", "no-cache"},
	"/maxage1": {"Cache-Control", "public, max-age=1"},
	"/smaxage": {"Cache-Control", "max-age=0, s-maxage=60"},
	"/json":    {"Content-Type", "application/json"},
	"/cookie":  {"Set-Cookie", "session=1"},
	"/vary":    {"Vary", "Accept-Language"},
}

// origin is an upstream whose answers depend on the path; hits counts the
// requests it served.
func origin(t *testing.T, hits *atomic.Int64) *plugintest.Upstream {
	return plugintest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("X-Origin", "yes")
		status := 200
		if kv, ok := originHeaders[r.URL.Path]; ok {
			h.Set(kv[0], kv[1])
		}
		switch r.URL.Path {
		case "/404":
			status = 404
		case "/500":
			status = 500
		case "/big":
			w.WriteHeader(200)
			_, _ = w.Write([]byte(strings.Repeat("b", 2000)))
			return
		case "/stream": // chunked: the size is known only at the end
			w.WriteHeader(200)
			for i := 0; i < 4; i++ {
				_, _ = w.Write([]byte(strings.Repeat("s", 500)))
				w.(http.Flusher).Flush()
			}
			return
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "n=%d path=%s lang=%s", n, r.URL.Path, r.Header.Get("Accept-Language"))
	})
}

func cacheStatus(t *testing.T, res plugintest.Result, want string) {
	t.Helper()
	if got := res.Header.Get("X-Cache-Status"); got != want {
		t.Fatalf("X-Cache-Status %q, want %q (status %d, body %q)", got, want, res.StatusCode, res.Body)
	}
}

func TestMissHitBypass(t *testing.T) {
	var hits atomic.Int64
	up := origin(t, &hits)
	base := plugintest.Start(t, []any{map[string]any{"handler": "gateway_proxy_cache", "instance_id": 1, "max_body_bytes": 1000}}, plugintest.WithUpstream(up)).URL

	r1 := plugintest.Do(t, "GET", base+"/a?x=1")
	plugintest.WantStatus(t, r1, 200)
	cacheStatus(t, r1, "Miss")
	r2 := plugintest.Do(t, "GET", base+"/a?x=1")
	cacheStatus(t, r2, "Hit")
	if r2.Body != r1.Body || hits.Load() != 1 {
		t.Fatalf("hit body %q vs %q, origin hits %d", r2.Body, r1.Body, hits.Load())
	}
	if r2.Header.Get("X-Origin") != "yes" || r2.Header.Get("Content-Type") != "text/plain; charset=utf-8" || r2.Header.Get("Age") == "" {
		t.Fatalf("hit headers %v", r2.Header)
	}
	// key: query, method
	cacheStatus(t, plugintest.Do(t, "GET", base+"/a?x=2"), "Miss")
	// key: the path as encoded, as the upstream gets it (an answer for
	// /p%2Fq is never served for /p/q, nor /%61 for /a)
	for _, p := range []string{"/p%2Fq", "/p/q", "/%61", "/a"} {
		cacheStatus(t, plugintest.Do(t, "GET", base+p), "Miss")
	}
	cacheStatus(t, plugintest.Do(t, "GET", base+"/p%2Fq"), "Hit")
	h := plugintest.Do(t, "HEAD", base+"/a?x=1")
	cacheStatus(t, h, "Miss")
	h = plugintest.Do(t, "HEAD", base+"/a?x=1")
	cacheStatus(t, h, "Hit")
	if h.Body != "" {
		t.Fatal("HEAD hit with a body")
	}
	// request bypasses
	cacheStatus(t, plugintest.Do(t, "POST", base+"/a?x=1"), "Bypass")
	n := hits.Load()
	res := plugintest.Do(t, "GET", base+"/a?x=1", "Cache-Control", "no-cache")
	cacheStatus(t, res, "Bypass")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/a?x=1", "Pragma", "no-cache"), "Bypass")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/a?x=1", "Authorization", "Bearer x"), "Bypass")
	if hits.Load() != n+3 {
		t.Fatal("bypassed requests must reach the origin")
	}
	cacheStatus(t, plugintest.Do(t, "GET", base+"/a?x=1"), "Hit")
	// request max-age=0: refetch and store again
	cacheStatus(t, plugintest.Do(t, "GET", base+"/a?x=1", "Cache-Control", "max-age=0"), "Miss")

	// response bypasses: not stored, every request reaches the origin
	for _, p := range []string{"/nostore", "/private", "/nocache", "/500", "/cookie", "/big", "/stream"} {
		res := plugintest.Do(t, "GET", base+p)
		cacheStatus(t, res, map[bool]string{true: "Miss", false: "Bypass"}[p == "/stream"])
		if p == "/stream" && len(res.Body) != 2000 {
			t.Fatalf("streamed body %d bytes", len(res.Body))
		}
		res = plugintest.Do(t, "GET", base+p)
		if res.Header.Get("X-Cache-Status") == "Hit" {
			t.Fatalf("%s was cached", p)
		}
	}
	// 404 is cached by default
	cacheStatus(t, plugintest.Do(t, "GET", base+"/404"), "Miss")
	res = plugintest.Do(t, "GET", base+"/404")
	cacheStatus(t, res, "Hit")
	plugintest.WantStatus(t, res, 404)
	// s-maxage wins over max-age=0
	cacheStatus(t, plugintest.Do(t, "GET", base+"/smaxage"), "Miss")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/smaxage"), "Hit")
	// max-age=1 expires
	cacheStatus(t, plugintest.Do(t, "GET", base+"/maxage1"), "Miss")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/maxage1"), "Hit")
	time.Sleep(1100 * time.Millisecond)
	cacheStatus(t, plugintest.Do(t, "GET", base+"/maxage1"), "Miss")

	// response Vary: one entry per Accept-Language
	cacheStatus(t, plugintest.Do(t, "GET", base+"/vary", "Accept-Language", "en"), "Miss")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/vary", "Accept-Language", "fr"), "Miss")
	en := plugintest.Do(t, "GET", base+"/vary", "Accept-Language", "en")
	cacheStatus(t, en, "Hit")
	if !strings.Contains(en.Body, "lang=en") {
		t.Fatalf("variant body %q", en.Body)
	}

	// purge
	if n := Purge(); n < 5 {
		t.Fatalf("purged %d", n)
	}
	cacheStatus(t, plugintest.Do(t, "GET", base+"/a?x=1"), "Miss")
}

func TestConfigRules(t *testing.T) {
	var hits atomic.Int64
	up := origin(t, &hits)
	base := plugintest.Start(t, []any{map[string]any{
		"handler": "gateway_proxy_cache", "instance_id": 2, "honor_cache_control": false,
		"content_types": []string{"application/*"}, "status_codes": []int{200}, "vary_headers": []string{"x-tenant"},
		"methods": []string{"GET"},
	}}, plugintest.WithUpstream(up)).URL
	cacheStatus(t, plugintest.Do(t, "GET", base+"/json"), "Miss")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/json"), "Hit")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/json", "Cache-Control", "no-cache"), "Hit") // not honoured
	cacheStatus(t, plugintest.Do(t, "GET", base+"/json", "X-Tenant", "a"), "Miss")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/json", "X-Tenant", "a"), "Hit")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/plain"), "Bypass") // content type
	cacheStatus(t, plugintest.Do(t, "HEAD", base+"/json"), "Bypass") // method
}

func TestReloadKeepsEntries(t *testing.T) {
	var hits atomic.Int64
	up := origin(t, &hits)
	cfg := map[string]any{"handler": "gateway_proxy_cache", "instance_id": 3}
	port := plugintest.FreePort(t) // the host is part of the key: keep it
	base := plugintest.Start(t, []any{cfg}, plugintest.WithUpstream(up), plugintest.WithPort(port)).URL
	cacheStatus(t, plugintest.Do(t, "GET", base+"/r"), "Miss")
	plugintest.Start(t, []any{cfg}, plugintest.WithUpstream(up), plugintest.WithPort(port))
	cacheStatus(t, plugintest.Do(t, "GET", base+"/r"), "Hit")
	// changed caching rules start over
	cfg["ttl_s"] = 60
	plugintest.Start(t, []any{cfg}, plugintest.WithUpstream(up), plugintest.WithPort(port))
	cacheStatus(t, plugintest.Do(t, "GET", base+"/r"), "Miss")
	// other instances do not share entries
	plugintest.Start(t, []any{map[string]any{"handler": "gateway_proxy_cache", "instance_id": 4}}, plugintest.WithUpstream(up), plugintest.WithPort(port))
	cacheStatus(t, plugintest.Do(t, "GET", base+"/r"), "Miss")
	if hits.Load() != 3 {
		t.Fatalf("origin hits %d", hits.Load())
	}
}

func TestCaddyfile(t *testing.T) {
	var hits atomic.Int64
	up := origin(t, &hits)
	base := plugintest.StartCaddyfile(t, `
http://127.0.0.1:{PORT} {
	reverse_proxy {UP}
	gateway_proxy_cache 30 {
		status_codes 200
		honor_cache_control false
	}
}
`, plugintest.WithUpstream(up)).URL
	cacheStatus(t, plugintest.Do(t, "GET", base+"/nostore"), "Miss")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/nostore"), "Hit")
	cacheStatus(t, plugintest.Do(t, "GET", base+"/404"), "Bypass")
}

// TestBodyBufferedOnlyWhileStorable: a body of unknown length (chunked)
// is kept while it could still be stored, up to max_body_bytes and never
// past the largest entry the store accepts (a quarter of its bytes). With
// max_body_bytes at its 1 GiB maximum, a client asking for a large
// chunked response made the gateway buffer all of it (and copy it) before
// the store refused it: one request, the response's size in memory.
func TestBodyBufferedOnlyWhileStorable(t *testing.T) {
	cache.SetLimits(4<<20, 0) // entries up to 1 MiB
	t.Cleanup(func() { cache.SetLimits(cachestore.DefaultMaxBytes, cachestore.DefaultMaxEntries) })
	const size = 48 << 20
	up := plugintest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("c", 64<<10))
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	base := plugintest.Start(t, []any{map[string]any{"handler": "gateway_proxy_cache", "instance_id": 3, "max_body_bytes": 1 << 30}}, plugintest.WithUpstream(up)).URL

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := plugintest.Client.Get(base + "/huge")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != size || resp.Header.Get("X-Cache-Status") != "Miss" || len(resp.TransferEncoding) == 0 {
		t.Fatalf("%d bytes, %v, %q, %v", n, err, resp.Header.Get("X-Cache-Status"), resp.TransferEncoding)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/2 {
		t.Fatalf("%d MiB allocated proxying a %d MiB response the cache cannot store", alloc>>20, size>>20)
	}
	if st := cache.Stats(); st.Entries != 0 {
		t.Fatalf("stored: %+v", st)
	}
}
