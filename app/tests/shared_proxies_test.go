package tests

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/modules/gwproxy"
)

// proxyOf is the live proxy handler of a service.
func proxyOf(t *testing.T, sid int64) caddyhttp.MiddlewareHandler {
	t.Helper()
	p := controlplane.Current().Router().ServiceProxy(sid)
	if p == nil {
		t.Fatalf("service %d has no live proxy", sid)
	}
	return p
}

// The service proxies outlive a change that does not touch them: an
// unrelated change keeps the same proxy instances (their connection pools
// and passive health), a target change gives that service a new proxy and
// no other, the replaced proxy is cleaned up and collected once no config
// uses it, and a change that fails to load leaves the shared proxies as
// they were.
func TestServiceProxiesSurviveUnrelatedChanges(t *testing.T) {
	g := testgw.Start(t, nil)
	upA, upB, upC := testgw.Echo(t, "a"), testgw.Echo(t, "b"), testgw.Echo(t, "c")
	sa, sb := g.Service("a", testgw.Addr(upA)), g.Service("b", testgw.Addr(upB))
	ra := g.Route("ra", sa, testgw.Paths("/a"))
	g.Route("rb", sb, testgw.Paths("/b"))
	pool := controlplane.Current().ProxyPool()
	if pool == nil {
		t.Fatal("no shared proxy pool")
	}
	pa, pb := proxyOf(t, sa), proxyOf(t, sb)
	oldB := weak.Make(pb.(*gwproxy.Handler))

	// Unrelated: a route, a plugin, a consumer.
	g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", ra), map[string]any{"name": "ra", "service_id": sa, "paths": []string{"/a", "/a2"}})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-id", "scope": "global"})
	g.Consumer("alice")
	if proxyOf(t, sa) != pa || proxyOf(t, sb) != pb {
		t.Fatal("an unrelated change provisioned the service proxies again")
	}

	// Service b's target moves to upstream c: b gets a new proxy, a keeps its own.
	targets := g.List(fmt.Sprintf("/api/v1/services/%d/targets", sb))
	g.Must("PUT", fmt.Sprintf("/api/v1/targets/%d", testgw.ID(targets[0])), map[string]any{"host": "127.0.0.1", "port": testgw.Port(upC)})
	if proxyOf(t, sb) == pb {
		t.Fatal("a target change kept the old proxy")
	}
	pb = nil
	if proxyOf(t, sa) != pa {
		t.Fatal("a target change of service b replaced service a's proxy")
	}
	if st, body, _ := g.Get("", "/b"); st != 200 || testgw.DecodeEcho(t, body).Name != "c" {
		t.Fatalf("service b after its target change: %d %s", st, body)
	}
	if st, body, _ := g.Get("", "/a"); st != 200 || testgw.DecodeEcho(t, body).Name != "a" {
		t.Fatalf("service a: %d %s", st, body)
	}
	if n := pool.Len(); n != 2 {
		t.Fatalf("%d shared proxies live, want 2 (the replaced one cleaned up)", n)
	}
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	if oldB.Value() != nil {
		t.Fatal("the replaced proxy is still reachable: something keeps it (or its config) alive")
	}

	// A change that fails to load (its listener address is taken) keeps
	// the shared proxies, and the next change still shares them.
	pb = proxyOf(t, sb)
	failListenChange(t, g)
	g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", ra), map[string]any{"name": "ra", "service_id": sa, "paths": []string{"/a"}})
	if proxyOf(t, sa) != pa || proxyOf(t, sb) != pb {
		t.Fatal("after a failed change, the next change provisioned the service proxies again")
	}
	if n := pool.Len(); n != 2 {
		t.Fatalf("%d shared proxies live after a failed change, want 2", n)
	}
	if st, body, _ := g.Get("", "/a"); st != 200 || testgw.DecodeEcho(t, body).Name != "a" {
		t.Fatalf("service a after a failed change: %d %s", st, body)
	}
}

// The shared proxies' private config is provisioned inside the load of
// the first config that uses them: it writes what every load writes
// (certmagic's default storage, Caddy's default logger), so outside a
// load it raced a `caddy reload` of the bootstrap config made while the
// gateway loads its stored configuration at startup. The race detector
// sees that race (go test -race); without it this checks that the
// reloads at startup end serving the stored configuration.
func TestProxyPoolProvisionedInsideALoad(t *testing.T) {
	done := make(chan error, 1)
	g2 := testgw.Start(t, &testgw.Options{DSN: storedEchoRoute(t), Starting: func(bootstrap []byte) {
		go func() {
			var err error
			for range 3 {
				if err = caddy.Load(bootstrap, true); err != nil {
					break
				}
			}
			done <- err
		}()
	}})
	if err := <-done; err != nil {
		t.Fatalf("reloading the bootstrap config at startup: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, body, _ := g2.Get("", "/x")
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after reloads at startup: %d %s", st, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if controlplane.Current().ProxyPool().Len() == 0 {
		t.Fatal("the stored service is not served by a shared proxy")
	}
}
