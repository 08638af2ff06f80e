package traffic

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
	"github.com/caddy-gateway/gateway/schema"
)

var allTypes = []string{"request-id", "ip-restriction", "cors", "redirect", "request-size-limit", "request-termination",
	"request-transform", "response-transform", "response-body-transform", "response-compression", "hsts"}

// Every type is registered with its default ordering, decodes {} (or its
// minimal config) and has a JSON Schema with every field.
func TestRegistry(t *testing.T) {
	ordering := map[string]int{"request-id": 100, "ip-restriction": 200, "cors": 300, "redirect": 400,
		"request-size-limit": 800, "request-termination": 900, "request-transform": 1100, "response-transform": 1300,
		"response-body-transform": 1310, "response-compression": 1400, "hsts": 1450}
	for _, name := range allTypes {
		typ, ok := plugins.Lookup(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		if typ.Ordering != ordering[name] {
			t.Errorf("%s ordering %d, want %d", name, typ.Ordering, ordering[name])
		}
		s := schema.JSONSchema(typ.New(), schema.Output)
		props := s["properties"].(map[string]any)
		if req, _ := s["required"].([]string); len(req) != len(props) {
			t.Errorf("%s: output schema requires %v of %d properties", name, req, len(props))
		}
		if _, ok := props["https_port"]; ok {
			t.Errorf("%s: internal field in the schema", name)
		}
	}
}

// The directives run in the gateway's default plugin order whatever order
// they are written in (see plugins.Register).
func TestCaddyfileDirectiveOrder(t *testing.T) {
	minimal := map[string]string{
		"ip-restriction": "{\n deny 10.0.0.1\n}",
		"redirect":       "{\n to_https\n}",
	}
	var lines []string
	for _, name := range slices.Backward(allTypes) {
		lines = append(lines, plugins.ModuleName(name)+" "+minimal[name])
	}
	lines = append(lines, "reverse_proxy 127.0.0.1:9", "header X-A b", "encode gzip", "redir /old /new")
	hs, err := plugintest.AdaptCaddyfile(t, strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hs {
		got = append(got, h["handler"].(string))
	}
	want := []string{"gateway_request_id", "gateway_ip_restriction", "headers", "gateway_cors",
		"gateway_redirect", "static_response", "gateway_request_size_limit", "gateway_request_termination", "encode",
		"gateway_request_transform", "gateway_response_transform", "gateway_response_body_transform",
		"gateway_response_compression", "gateway_hsts", "reverse_proxy"}
	// the redir's handler is inside its own matcher route; keep the subroute out
	got = slices.DeleteFunc(got, func(s string) bool { return s == "subroute" })
	if !slices.Equal(got, want) {
		t.Fatalf("handler order\n %v\nwant\n %v", got, want)
	}
}

// A Caddyfile using the directives serves traffic.
func TestCaddyfileEndToEnd(t *testing.T) {
	g := plugintest.StartCaddyfile(t, `
http://127.0.0.1:{PORT} {
	log_skip
	gateway_request_id {
		header_name X-Trace
	}
	gateway_request_transform {
		set_headers X-From caddyfile
		set_headers X-Client {remote_host}
	}
	gateway_response_transform {
		add_headers X-Done yes
	}
	gateway_ip_restriction {
		allow 127.0.0.1
	}
	reverse_proxy {UP}
}
`)
	res := g.Get("/cf")
	plugintest.WantStatus(t, res, http.StatusOK)
	up := g.Upstream.Last()
	if up.Header.Get("X-From") != "caddyfile" || up.Header.Get("X-Client") != "127.0.0.1" || up.Header.Get("X-Trace") == "" {
		t.Fatalf("upstream headers %v", up.Header)
	}
	if res.Header.Get("X-Trace") != up.Header.Get("X-Trace") || res.Header.Get("X-Done") != "yes" {
		t.Fatalf("response headers %v", res.Header)
	}
}
