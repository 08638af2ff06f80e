package ratelimit

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gateway/gateway/modules/plugins"
)

// Counters outlive a reload (the new instance is provisioned before the old
// one is cleaned up) and go with the last instance that holds them.
func TestCountersLiveAsLongAsAnInstanceHoldsThem(t *testing.T) {
	provision := func() *RateLimit {
		rl := &RateLimit{Limit: 1, WindowS: 60, Key: "ip", IPv6PrefixLength: 64, Policy: "local", Instance: plugins.Instance{InstanceID: 987654}}
		if err := rl.Provision(caddy.Context{}); err != nil {
			t.Fatal(err)
		}
		return rl
	}
	old := provision()
	if !counters.Take(old.prefix+"k", 1, time.Minute).Allowed {
		t.Fatal("first request refused")
	}
	reloaded := provision()
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if counters.Take(reloaded.prefix+"k", 1, time.Minute).Allowed {
		t.Fatal("a reload reset the counters")
	}
	if err := reloaded.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if !counters.Take(reloaded.prefix+"k", 1, time.Minute).Allowed {
		t.Fatal("the counters outlived every instance")
	}
	counters.Reset(reloaded.prefix)
}
