package traffic

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestRequestTransformTraffic(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "request-transform", `{
		"remove_headers":["X-Debug","X-Internal-*"],
		"rename_headers":{"X-Old":"X-New","X-Absent":"X-Never"},
		"set_headers":{"X-Client":"{http.request.remote.host}","X-Set":"set","Host":"upstream.example","X-Unknown":"\\{not.a.placeholder\\}","X-Json":"{\"a\": 1}"},
		"add_headers":{"X-Set":"added","X-Via":"gateway"},
		"remove_query":["debug"],
		"set_query":{"source":"gw","path":"{http.request.uri.path}"}}`)})
	res := g.Get("/p?debug=1&keep=a+b&source=client",
		"X-Debug", "1", "X-Internal-Token", "t", "X-Old", "old", "X-New", "replaced", "X-Set", "client", "Host", "client.example")
	plugintest.WantStatus(t, res, http.StatusOK)
	up := g.Upstream.Last()
	h := up.Header
	check := func(name string, want ...string) {
		t.Helper()
		got := h.Values(name)
		if len(got) != len(want) {
			t.Errorf("upstream %s = %q, want %q", name, got, want)
			return
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("upstream %s = %q, want %q", name, got, want)
			}
		}
	}
	check("X-Debug")
	check("X-Internal-Token")
	check("X-Old")
	check("X-New", "old")
	check("X-Never")
	check("X-Client", "127.0.0.1")
	check("X-Set", "set", "added")
	check("X-Via", "gateway")
	check("X-Unknown", "{not.a.placeholder}") // escaped braces are literal
	check("X-Json", `{"a": 1}`)               // braces that are not a placeholder are literal
	if up.Host != "upstream.example" {
		t.Errorf("upstream Host %q", up.Host)
	}
	u, _ := url.Parse(up.URI)
	q := u.Query()
	if u.Path != "/p" || q.Has("debug") || q.Get("keep") != "a b" || q.Get("source") != "gw" || q.Get("path") != "/p" || len(q) != 3 {
		t.Errorf("upstream URI %q", up.URI)
	}
}

func TestResponseTransformTraffic(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-transform", `{
		"remove_headers":["X-Powered-*","Server"],
		"rename_headers":{"X-Upstream-Time":"X-Time"},
		"set_headers":{"Cache-Control":"no-store","X-Path":"{http.request.uri.path}"},
		"add_headers":{"X-Served-By":"gateway","Cache-Control":"private"}}`)},
		plugintest.WithUpstreamFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Powered-By", "php")
			w.Header().Set("X-Powered-Engine", "x")
			w.Header().Set("Server", "apache")
			w.Header().Set("X-Upstream-Time", "12ms")
			w.Header().Set("Cache-Control", "public")
			w.Header().Add("X-Served-By", "upstream")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("body"))
		}))
	res := g.Get("/r")
	plugintest.WantStatus(t, res, http.StatusCreated)
	if res.Body != "body" {
		t.Fatalf("body %q", res.Body)
	}
	for name, want := range map[string][]string{
		"X-Powered-By":     nil,
		"X-Powered-Engine": nil,
		"Server":           nil,
		"X-Upstream-Time":  nil,
		"X-Time":           {"12ms"},
		"Cache-Control":    {"no-store", "private"},
		"X-Path":           {"/r"},
		"X-Served-By":      {"upstream", "gateway"},
	} {
		got := res.Header.Values(name)
		if len(got) != len(want) || (len(want) > 0 && (got[0] != want[0] || got[len(got)-1] != want[len(want)-1])) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}
