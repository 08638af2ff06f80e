package plugins_test

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/modules/plugins"
	_ "github.com/caddy-gateway/gateway/modules/plugins/auth"
	_ "github.com/caddy-gateway/gateway/modules/plugins/httplog"
	_ "github.com/caddy-gateway/gateway/modules/plugins/proxycache"
	_ "github.com/caddy-gateway/gateway/modules/plugins/ratelimit"
	_ "github.com/caddy-gateway/gateway/modules/plugins/traffic"
)

// Caddy's own instances of every plugin module start from the type's
// defaults, so plain Caddy JSON that leaves fields out means the same as
// the admin API: what NormalizeConfig fills in for {} is what a bare
// module holds.
func TestCaddyInstancesStartFromDefaults(t *testing.T) {
	types := plugins.Types()
	if len(types) < 18 {
		t.Fatalf("only %d plugin types registered", len(types))
	}
	for _, typ := range types {
		info, err := caddy.GetModule("http.handlers." + typ.ModuleName())
		if err != nil {
			t.Fatalf("%s: %v", typ.Name, err)
		}
		bare, _ := json.Marshal(info.New())
		var got, want map[string]any
		_ = json.Unmarshal(bare, &got)
		norm, err := plugins.NormalizeConfig(typ.Name, json.RawMessage(`{}`))
		if err != nil {
			continue // a type with required fields (rate-limit's limit, http-log's endpoint)
		}
		_ = json.Unmarshal(norm, &want)
		for k, v := range want {
			gb, _ := json.Marshal(got[k])
			wb, _ := json.Marshal(v)
			if string(gb) != string(wb) {
				t.Errorf("%s.%s: Caddy instance %s, API default %s", typ.Name, k, gb, wb)
			}
		}
	}
}
