package ratelimit

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/consumers"
	_ "github.com/caddy-gateway/gateway/modules/plugins/auth"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
	"github.com/caddy-gateway/gateway/schema"
)

// The in-process Caddy of these tests is plugintest's.
func TestMain(m *testing.M) { plugintest.Main(m) }

func TestConfig(t *testing.T) {
	plugintest.Config{
		Type: "rate-limit",
		Normalized: [][2]string{
			{`{"limit":10}`, `{"limit":10,"window_s":60,"key":"ip","header_name":"","ipv6_prefix_length":64,"policy":"local","sync_interval_ms":0,"fault_tolerant":true}`},
			{`{"limit":5,"window_s":1,"key":"header","header_name":"X-Tenant"}`, `{"limit":5,"window_s":1,"key":"header","header_name":"X-Tenant","ipv6_prefix_length":64,"policy":"local","sync_interval_ms":0,"fault_tolerant":true}`},
			{`{"limit":5,"policy":"redis","sync_interval_ms":100,"fault_tolerant":false}`, `{"limit":5,"window_s":60,"key":"ip","header_name":"","ipv6_prefix_length":64,"policy":"redis","sync_interval_ms":100,"fault_tolerant":false}`},
		},
		Refused: map[string]string{
			`{}`:                                                     "config.limit: is required",
			`null`:                                                   "config.limit: is required",
			`{"limit":0}`:                                            "config.limit: must be at least 1",
			`{"limit":"10"}`:                                         "config.limit: must be an integer",
			`{"limit":1.5}`:                                          "config.limit: must be an integer",
			`{"limit":1,"window_s":0}`:                               "config.window_s: must be at least 1",
			`{"limit":1,"key":"user"}`:                               "config.key: must be one of",
			`{"limit":1,"key":"header"}`:                             "config.header_name: is required when key is header",
			`{"limit":1,"header_name":"a b"}`:                        "config.header_name: must be a valid header name",
			`{"limit":1,"window":60}`:                                "config.window: unknown field",
			`{"limit":1,"instance_id":3}`:                            "config.instance_id: unknown field",
			`{"limit":1,"key":"header","x":1}`:                       "config.x: unknown field",
			`{"limit":1,"key":null}`:                                 "config.key: must not be null",
			`{"limit":1,"window_s":99999999999}`:                     "config.window_s: must be at most",
			`{"limit":1,"ipv6_prefix_length":0}`:                     "config.ipv6_prefix_length: must be at least 1",
			`{"limit":1,"ipv6_prefix_length":129}`:                   "config.ipv6_prefix_length: must be at most 128",
			`{"limit":1,"policy":"memcached"}`:                       "config.policy: must be one of",
			`{"limit":1,"policy":"redis","sync_interval_ms":-1}`:     "config.sync_interval_ms: must be at least 0",
			`{"limit":1,"policy":"redis","sync_interval_ms":600000}`: "config.sync_interval_ms: must be at most",
			`{"limit":1,"sync_interval_ms":100}`:                     "config.sync_interval_ms: applies to the redis and cluster policies only",
			`{"limit":1,"fault_tolerant":"yes"}`:                     "config.fault_tolerant: must be a boolean",
		},
		Caddyfile: [][2]string{
			{"gateway_rate_limit 5", `{"handler":"gateway_rate_limit","limit":5,"window_s":60,"key":"ip","header_name":"","ipv6_prefix_length":64,"policy":"local","sync_interval_ms":0,"fault_tolerant":true}`},
			{"gateway_rate_limit 2 30 {\n key header X-User\n}", `{"handler":"gateway_rate_limit","limit":2,"window_s":30,"key":"header","header_name":"X-User","ipv6_prefix_length":64,"policy":"local","sync_interval_ms":0,"fault_tolerant":true}`},
			{"gateway_rate_limit 2 {\n policy redis\n sync_interval_ms 50\n fault_tolerant false\n}", `{"handler":"gateway_rate_limit","limit":2,"window_s":60,"key":"ip","header_name":"","ipv6_prefix_length":64,"policy":"redis","sync_interval_ms":50,"fault_tolerant":false}`},
			{"gateway_rate_limit 4 {\n ipv6_prefix_length 56\n}", `{"handler":"gateway_rate_limit","limit":4,"window_s":60,"key":"ip","header_name":"","ipv6_prefix_length":56,"policy":"local","sync_interval_ms":0,"fault_tolerant":true}`},
			{"gateway_rate_limit {\n limit 3\n key route\n}", `{"handler":"gateway_rate_limit","limit":3,"window_s":60,"key":"route","header_name":"","ipv6_prefix_length":64,"policy":"local","sync_interval_ms":0,"fault_tolerant":true}`},
		},
		BadCaddyfile: []string{
			"gateway_rate_limit",
			"gateway_rate_limit 1 2 3",
			"gateway_rate_limit 5 {\n key\n}",
			"gateway_rate_limit 5 {\n key header X-A X-B\n}",
			"gateway_rate_limit 5 {\n key header\n}",
			"gateway_rate_limit ten",
		},
	}.Check(t)
	fresh := new(RateLimit)
	fresh.SetDefaults()
	if schema.Check(fresh) == nil {
		t.Error("a fresh config without limit must not validate")
	}
}

func checkHeaders(t *testing.T, res plugintest.Result, limit, remaining int) {
	t.Helper()
	if res.Header.Get("RateLimit-Limit") != strconv.Itoa(limit) ||
		res.Header.Get("RateLimit-Remaining") != strconv.Itoa(remaining) {
		t.Fatalf("headers: limit %q remaining %q, want %d %d", res.Header.Get("RateLimit-Limit"), res.Header.Get("RateLimit-Remaining"), limit, remaining)
	}
	if reset, err := strconv.Atoi(res.Header.Get("RateLimit-Reset")); err != nil || reset < 1 || reset > 60 {
		t.Fatalf("RateLimit-Reset %q", res.Header.Get("RateLimit-Reset"))
	}
}

func TestLimitAndReload(t *testing.T) {
	// counters start fresh: the previous server released its instances
	cfg := map[string]any{"handler": "gateway_rate_limit", "limit": 3, "instance_id": 4242}
	base := plugintest.Start(t, []any{cfg}).URL
	for i := 0; i < 3; i++ {
		res := plugintest.Do(t, "GET", base+"/")
		plugintest.WantStatus(t, res, 200)
		checkHeaders(t, res, 3, 2-i)
	}
	res := plugintest.Do(t, "GET", base+"/")
	plugintest.WantGatewayError(t, res, 429)
	checkHeaders(t, res, 3, 0)
	if ra, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 120 {
		t.Fatalf("Retry-After %q", res.Header.Get("Retry-After"))
	}

	// a reload of the same config keeps the counters
	base = plugintest.Start(t, []any{cfg}).URL
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/"), 429)
	// so does a changed config of the same instance
	cfg["limit"] = 4
	base = plugintest.Start(t, []any{cfg}).URL
	res = plugintest.Do(t, "GET", base+"/")
	plugintest.WantStatus(t, res, 200)
	checkHeaders(t, res, 4, 0)
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/"), 429)
	// another instance has its own counters
	base = plugintest.Start(t, []any{map[string]any{"handler": "gateway_rate_limit", "limit": 3, "instance_id": 4243}}).URL
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/"), 200)
}

// clientFrom returns a client whose connections come from the local address
// ip (any 127.0.0.0/8 address works on loopback), to act as another client IP.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

func TestKeys(t *testing.T) {
	// counters start fresh: the previous server released its instances
	other := clientFrom("127.0.0.2")

	// ip (default): another client address has its own counter
	base := plugintest.Start(t, []any{map[string]any{"handler": "gateway_rate_limit", "limit": 1, "instance_id": 1}}).URL
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/"), 200)
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/"), 429)
	plugintest.WantStatus(t, plugintest.Send(t, other, "GET", base+"/", nil), 200)

	// global: one counter for everybody
	base = plugintest.Start(t, []any{map[string]any{"handler": "gateway_rate_limit", "limit": 1, "key": "global", "instance_id": 2}}).URL
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/"), 200)
	plugintest.WantGatewayError(t, plugintest.Send(t, other, "GET", base+"/", nil), 429)

	// header: per value, missing header falls back to the client ip
	base = plugintest.Start(t, []any{map[string]any{"handler": "gateway_rate_limit", "limit": 1, "key": "header", "header_name": "X-Tenant", "instance_id": 3}}).URL
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "X-Tenant", "a"), 200)
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/", "X-Tenant", "a"), 429)
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "X-Tenant", "b"), 200)
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/"), 200)
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/"), 429)
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "X-Tenant", strings.Repeat("x", 1000)), 200)

	// consumer: per authenticated consumer (after key-auth)
	list := []consumers.Consumer{
		{ID: 1, Username: "alice", Credentials: []consumers.Credential{{ID: 1, Type: "key-auth", Key: "ka"}}},
		{ID: 2, Username: "bob", Credentials: []consumers.Credential{{ID: 2, Type: "key-auth", Key: "kb"}}},
	}
	base = plugintest.Start(t, []any{map[string]any{"handler": "gateway_key_auth", "consumers": list},
		map[string]any{"handler": "gateway_rate_limit", "limit": 2, "key": "consumer", "instance_id": 4}}).URL
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "apikey", "ka"), 200)
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "apikey", "ka"), 200)
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/", "apikey", "ka"), 429)
	res := plugintest.Do(t, "GET", base+"/", "apikey", "kb")
	plugintest.WantStatus(t, res, 200)
	checkHeaders(t, res, 2, 1)

	// route / service: outside the gateway router both are 0: one counter
	base = plugintest.Start(t, []any{map[string]any{"handler": "gateway_rate_limit", "limit": 1, "key": "route", "instance_id": 5}}).URL
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/"), 200)
	plugintest.WantGatewayError(t, plugintest.Send(t, other, "GET", base+"/", nil), 429)
}

func TestCaddyfile(t *testing.T) {
	// counters start fresh: the previous server released its instances
	src := `
http://127.0.0.1:{PORT} {
	reverse_proxy {UP}
	gateway_rate_limit 2 30 {
		key header X-User
	}
}
`
	base := plugintest.StartCaddyfile(t, src).URL
	for i := 0; i < 2; i++ {
		plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "X-User", "u"), 200)
	}
	res := plugintest.Do(t, "GET", base+"/", "X-User", "u")
	plugintest.WantGatewayError(t, res, 429)
	if res.Header.Get("RateLimit-Limit") != "2" {
		t.Fatal("headers")
	}
	// standalone instances are keyed by their settings: a reload keeps them
	base = plugintest.StartCaddyfile(t, src).URL
	plugintest.WantGatewayError(t, plugintest.Do(t, "GET", base+"/", "X-User", "u"), 429)
	plugintest.WantStatus(t, plugintest.Do(t, "GET", base+"/", "X-User", "v"), 200)
}
