package caddyfile

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/caddy-gateway/gateway/app/controlplane"
)

func adapt(t *testing.T, src string) map[string]any {
	t.Helper()
	out, warns, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	if len(warns) > 0 {
		t.Logf("warnings: %v", warns)
	}
	var cfg map[string]any
	_ = json.Unmarshal(out, &cfg)
	return cfg
}

func gatewayApp(cfg map[string]any) map[string]any {
	return cfg["apps"].(map[string]any)["gateway"].(map[string]any)
}

func TestShippedCaddyfileDefaults(t *testing.T) {
	src, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"GATEWAY_ADMIN_LISTEN", "GATEWAY_DB", "GATEWAY_POSTGRES_DSN", "GATEWAY_HTTP_LISTEN", "GATEWAY_HTTPS_LISTEN", "CADDY_ADMIN"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	gw := gatewayApp(adapt(t, string(src)))
	want := map[string]any{"admin_listen": "127.0.0.1:9080", "database": "sqlite", "dsn": "./data/gateway.db",
		"http_listen": ":8080", "https_listen": ":8443", "caddy_admin": "unix/./data/caddy-admin.sock|0600"}
	for k, v := range want {
		if gw[k] != v {
			t.Errorf("%s = %v, want %v", k, gw[k], v)
		}
	}
	// Unset, GATEWAY_POSTGRES_DSN keeps SQLite at start too.
	var unset controlplane.Bootstrap
	raw, _ := json.Marshal(gw)
	_ = json.Unmarshal(raw, &unset)
	if unset.SetDefaults(); unset.Database != "sqlite" || unset.StoreDSN() != "./data/gateway.db" {
		t.Errorf("without GATEWAY_POSTGRES_DSN: %+v", unset)
	}
	// GATEWAY_POSTGRES_DSN is read at start ({env.…}): the store is
	// PostgreSQL, and the DSN with its password is not in the adapted
	// config (Caddy's admin endpoint serves it, Caddy autosaves it).
	t.Setenv("GATEWAY_HTTP_LISTEN", "127.0.0.1:18080")
	for _, dsn := range []string{
		"postgres://gw:planted-pw@127.0.0.1/gw",
		"host=127.0.0.1 port=5432 user=gw password=planted-pw dbname=gw connect_timeout=5", // keyword/value, with its spaces
	} {
		t.Setenv("GATEWAY_POSTGRES_DSN", dsn)
		cfg := adapt(t, string(src))
		if raw, _ := json.Marshal(cfg); strings.Contains(string(raw), "planted-pw") {
			t.Errorf("the adapted config holds the DSN's password: %s", raw)
		}
		gw = gatewayApp(cfg)
		var boot controlplane.Bootstrap
		raw, _ = json.Marshal(gw)
		if err := json.Unmarshal(raw, &boot); err != nil {
			t.Fatal(err)
		}
		boot.SetDefaults()
		if boot.Database != "postgres" || boot.StoreDSN() != dsn || gw["http_listen"] != "127.0.0.1:18080" {
			t.Errorf("environment not honoured: %+v (store DSN %q)", boot, boot.StoreDSN())
		}
	}
}

func TestGatewayOptionBesideSites(t *testing.T) {
	cfg := adapt(t, `{
	gateway {
		admin_listen 127.0.0.1:9999
		database sqlite /tmp/x.db
		health_interval 5s
		wasm_memory_limit 512MiB
		max_header_size 64KiB
	}
}
:8081 {
	respond "hi"
}`)
	gw := gatewayApp(cfg)
	if gw["admin_listen"] != "127.0.0.1:9999" || gw["dsn"] != "/tmp/x.db" || gw["health_interval"] == nil || gw["wasm_memory_limit"] != float64(512<<20) ||
		gw["max_header_bytes"] != float64(64<<10) {
		t.Fatalf("gateway app: %v", gw)
	}
	if _, ok := cfg["apps"].(map[string]any)["http"]; !ok {
		t.Fatal("the user's site block was lost")
	}
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("{\n\tgateway {\n\t\tbogus 1\n\t}\n}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("unknown option: %v", err)
	}
	for _, opt := range []string{"wasm_memory_limit", "max_header_size"} {
		for _, bad := range []string{"lots", "0", "-1GiB"} {
			_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("{\n\tgateway {\n\t\t"+opt+" "+bad+"\n\t}\n}\n"), nil)
			if err == nil || !strings.Contains(err.Error(), opt) {
				t.Fatalf("%s %s: %v", opt, bad, err)
			}
		}
	}
}

// The shipped Caddyfile reads GATEWAY_REDIS_URL when connecting: the URL
// and its password are not in the adapted config, and a password written
// into the config itself is refused.
func TestRedisOption(t *testing.T) {
	src, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GATEWAY_REDIS_URL", "redis://gw:s3cret@127.0.0.1:6390/2")
	gw := gatewayApp(adapt(t, string(src)))
	if gw["redis"] != "{env.GATEWAY_REDIS_URL}" {
		t.Fatalf("redis = %v", gw["redis"])
	}
	var boot controlplane.Bootstrap
	raw, _ := json.Marshal(gw)
	_ = json.Unmarshal(raw, &boot)
	if boot.RedisURL() != "redis://gw:s3cret@127.0.0.1:6390/2" || boot.CheckRedis() != nil {
		t.Fatalf("RedisURL %q, CheckRedis %v", boot.RedisURL(), boot.CheckRedis())
	}
	literal := controlplane.Bootstrap{Redis: "redis://gw:s3cret@127.0.0.1:6390/0"}
	if err := literal.CheckRedis(); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a literal password: %v", err)
	}
	for _, bad := range []string{"http://127.0.0.1:6379", "127.0.0.1:6379"} {
		if (controlplane.Bootstrap{Redis: bad}).CheckRedis() == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if (controlplane.Bootstrap{Redis: "rediss://127.0.0.1:6380/1"}).CheckRedis() != nil {
		t.Error("rediss:// refused")
	}
}
