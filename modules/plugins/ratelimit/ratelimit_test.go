package ratelimit

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/modules/consumers"
	"github.com/caddy-gateway/gateway/modules/plugins"
	_ "github.com/caddy-gateway/gateway/modules/plugins/auth"
	"github.com/caddy-gateway/gateway/modules/process"
)

func TestNormalize(t *testing.T) {
	got, err := plugins.NormalizeConfig("rate-limit", json.RawMessage(`{"limit":10}`))
	if err != nil || string(got) != `{"limit":10,"window_s":60,"key":"ip","header_name":""}` {
		t.Fatalf("defaults: %s %v", got, err)
	}
	got, err = plugins.NormalizeConfig("rate-limit", json.RawMessage(`{"limit":5,"window_s":1,"key":"header","header_name":"X-Tenant"}`))
	if err != nil || string(got) != `{"limit":5,"window_s":1,"key":"header","header_name":"X-Tenant"}` {
		t.Fatalf("full: %s %v", got, err)
	}
	for cfg, want := range map[string]string{
		`{}`:                                 "config.limit: is required",
		`null`:                               "config.limit: is required",
		`{"limit":0}`:                        "config.limit: must be at least 1",
		`{"limit":"10"}`:                     "config.limit: must be an integer",
		`{"limit":1.5}`:                      "config.limit: must be an integer",
		`{"limit":1,"window_s":0}`:           "config.window_s: must be at least 1",
		`{"limit":1,"key":"user"}`:           "config.key: must be one of",
		`{"limit":1,"key":"header"}`:         "config.header_name: is required when key is header",
		`{"limit":1,"header_name":"a b"}`:    "config.header_name: must be a valid header name",
		`{"limit":1,"window":60}`:            "config.window: unknown field",
		`{"limit":1,"instance_id":3}`:        "config.instance_id: unknown field",
		`{"limit":1,"key":"header","x":1}`:   "config.x: unknown field",
		`{"limit":1,"key":null}`:             "config.key: must not be null",
		`{"limit":1,"window_s":99999999999}`: "config.window_s: must be at most",
	} {
		_, err := plugins.NormalizeConfig("rate-limit", json.RawMessage(cfg))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", cfg, err, want)
		}
	}
	fresh := new(RateLimit)
	fresh.SetDefaults()
	if fresh.Validate() == nil {
		t.Error("a fresh config without limit must not validate")
	}
}

func checkHeaders(t *testing.T, res result, limit, remaining int) {
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
	process.RateLimits.Reset("")
	up := upstream(t)
	cfg := map[string]any{"handler": "gateway_rate_limit", "limit": 3, "instance_id": 4242}
	base := startCaddy(t, up, cfg)
	for i := 0; i < 3; i++ {
		res := do(t, "GET", base+"/")
		wantStatus(t, res, 200)
		checkHeaders(t, res, 3, 2-i)
	}
	res := do(t, "GET", base+"/")
	wantGatewayError(t, res, 429)
	checkHeaders(t, res, 3, 0)
	if ra, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 120 {
		t.Fatalf("Retry-After %q", res.Header.Get("Retry-After"))
	}

	// a reload of the same config keeps the counters
	base = startCaddy(t, up, cfg)
	wantGatewayError(t, do(t, "GET", base+"/"), 429)
	// so does a changed config of the same instance
	cfg["limit"] = 4
	base = startCaddy(t, up, cfg)
	res = do(t, "GET", base+"/")
	wantStatus(t, res, 200)
	checkHeaders(t, res, 4, 0)
	wantGatewayError(t, do(t, "GET", base+"/"), 429)
	// another instance has its own counters
	base = startCaddy(t, up, map[string]any{"handler": "gateway_rate_limit", "limit": 3, "instance_id": 4243})
	wantStatus(t, do(t, "GET", base+"/"), 200)
}

func TestKeys(t *testing.T) {
	process.RateLimits.Reset("")
	up := upstream(t)
	other := clientFrom("127.0.0.2")

	// ip (default): another client address has its own counter
	base := startCaddy(t, up, map[string]any{"handler": "gateway_rate_limit", "limit": 1, "instance_id": 1})
	wantStatus(t, do(t, "GET", base+"/"), 200)
	wantGatewayError(t, do(t, "GET", base+"/"), 429)
	wantStatus(t, doWith(t, other, "GET", base+"/"), 200)

	// global: one counter for everybody
	base = startCaddy(t, up, map[string]any{"handler": "gateway_rate_limit", "limit": 1, "key": "global", "instance_id": 2})
	wantStatus(t, do(t, "GET", base+"/"), 200)
	wantGatewayError(t, doWith(t, other, "GET", base+"/"), 429)

	// header: per value, missing header falls back to the client ip
	base = startCaddy(t, up, map[string]any{"handler": "gateway_rate_limit", "limit": 1, "key": "header", "header_name": "X-Tenant", "instance_id": 3})
	wantStatus(t, do(t, "GET", base+"/", "X-Tenant", "a"), 200)
	wantGatewayError(t, do(t, "GET", base+"/", "X-Tenant", "a"), 429)
	wantStatus(t, do(t, "GET", base+"/", "X-Tenant", "b"), 200)
	wantStatus(t, do(t, "GET", base+"/"), 200)
	wantGatewayError(t, do(t, "GET", base+"/"), 429)
	wantStatus(t, do(t, "GET", base+"/", "X-Tenant", strings.Repeat("x", 1000)), 200)

	// consumer: per authenticated consumer (after key-auth)
	list := []consumers.Consumer{
		{ID: 1, Username: "alice", Credentials: []consumers.Credential{{ID: 1, Type: "key-auth", Key: "ka"}}},
		{ID: 2, Username: "bob", Credentials: []consumers.Credential{{ID: 2, Type: "key-auth", Key: "kb"}}},
	}
	base = startCaddy(t, up,
		map[string]any{"handler": "gateway_key_auth", "consumers": list},
		map[string]any{"handler": "gateway_rate_limit", "limit": 2, "key": "consumer", "instance_id": 4})
	wantStatus(t, do(t, "GET", base+"/", "apikey", "ka"), 200)
	wantStatus(t, do(t, "GET", base+"/", "apikey", "ka"), 200)
	wantGatewayError(t, do(t, "GET", base+"/", "apikey", "ka"), 429)
	res := do(t, "GET", base+"/", "apikey", "kb")
	wantStatus(t, res, 200)
	checkHeaders(t, res, 2, 1)

	// route / service: outside the gateway router both are 0: one counter
	base = startCaddy(t, up, map[string]any{"handler": "gateway_rate_limit", "limit": 1, "key": "route", "instance_id": 5})
	wantStatus(t, do(t, "GET", base+"/"), 200)
	wantGatewayError(t, doWith(t, other, "GET", base+"/"), 429)
}

func TestCaddyfile(t *testing.T) {
	process.RateLimits.Reset("")
	up := upstream(t)
	src := `
http://127.0.0.1:{PORT} {
	reverse_proxy {UP}
	gateway_rate_limit 2 30 {
		key header X-User
	}
}
`
	base := startCaddyfile(t, up, src)
	for i := 0; i < 2; i++ {
		wantStatus(t, do(t, "GET", base+"/", "X-User", "u"), 200)
	}
	res := do(t, "GET", base+"/", "X-User", "u")
	wantGatewayError(t, res, 429)
	if res.Header.Get("RateLimit-Limit") != "2" {
		t.Fatal("headers")
	}
	// standalone instances are keyed by their settings: a reload keeps them
	base = startCaddyfile(t, up, src)
	wantGatewayError(t, do(t, "GET", base+"/", "X-User", "u"), 429)
	wantStatus(t, do(t, "GET", base+"/", "X-User", "v"), 200)
}
