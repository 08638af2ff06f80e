package tests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/app/observe"
	"github.com/caddy-gateway/gateway/internal/guard"
)

func TestStreamRoutesAPI(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("tcp", "127.0.0.1:9")
	addrA, addrB := testgw.FreeAddr(t), testgw.FreeAddr(t)
	created := g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "a", "listen_addr": addrA, "service_id": sid})
	if created["note"] != "listener changes take effect on restart" || created["enabled"] != true || created["listen_addr"] != addrA {
		t.Fatalf("create: %v", created)
	}
	id := testgw.ID(created)
	same := g.Must("PUT", fmt.Sprintf("/api/v1/stream-routes/%d", id), map[string]any{"name": "a2", "listen_addr": addrA, "service_id": sid})
	if _, ok := same["note"]; ok || same["name"] != "a2" {
		t.Fatalf("PUT without a listen_addr change carries a note: %v", same)
	}
	moved := g.Must("PUT", fmt.Sprintf("/api/v1/stream-routes/%d", id), map[string]any{"name": "a2", "listen_addr": addrB, "service_id": sid})
	if moved["note"] != "listener changes take effect on restart" {
		t.Fatalf("PUT with a listen_addr change: %v", moved)
	}
	g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "other", "listen_addr": addrA, "service_id": sid})
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"name": "dup", "listen_addr": addrB, "service_id": sid}, "listen_addr"},
		{map[string]any{"name": "x", "listen_addr": "nope", "service_id": sid}, "listen_addr"},
		{map[string]any{"name": "x", "listen_addr": "127.0.0.1:1", "service_id": 999}, "service_id"},
		{map[string]any{"listen_addr": "127.0.0.1:1", "service_id": sid}, "name"},
	} {
		st, body := g.Do("POST", "/api/v1/stream-routes", c.body)
		wantError(t, st, body, 400, c.field)
	}
	var list []map[string]any
	g.JSON("GET", "/api/v1/stream-routes", nil, &list)
	if len(list) != 2 || testgw.ID(list[0]) != id {
		t.Fatalf("list: %v", list)
	}
	del := g.Must("DELETE", fmt.Sprintf("/api/v1/stream-routes/%d", id), nil)
	if del["deleted"] != true || del["note"] != "listener changes take effect on restart" {
		t.Fatalf("delete: %v", del)
	}
	st, body := g.Do("DELETE", fmt.Sprintf("/api/v1/stream-routes/%d", id), nil)
	wantError(t, st, body, 404, "not found")
}

// streamSetup is a gateway whose stream route "tcp" (id) on listen
// proxies to the TCP echo service s1 ("one"); s2 is a second one ("two",
// at two).
type streamSetup struct {
	g           *testgw.Gateway
	s1, s2, id  int64
	two, listen string
}

// boundStreamRoute starts a streamSetup's gateway, then restarts it so
// that the stored route binds (a new listen_addr binds only at start).
func boundStreamRoute(t *testing.T) streamSetup {
	t.Helper()
	g := testgw.Start(t, nil)
	one, two := testgw.TCPEcho(t, "one"), testgw.TCPEcho(t, "two")
	st := streamSetup{s1: g.Service("one", one), s2: g.Service("two", two), two: two, listen: testgw.FreeAddr(t)}
	st.id = testgw.ID(g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "tcp", "listen_addr": st.listen, "service_id": st.s1}))
	if _, err := testgw.TCPSay(st.listen, "hi"); err == nil {
		t.Fatal("a new listen_addr was bound before a restart")
	}
	dsn := g.DSN
	if err := stopGateway(); err != nil {
		t.Fatal(err)
	}
	st.g = testgw.Start(t, &testgw.Options{DSN: dsn})
	return st
}

// dial opens a connection to the stream route's listener (closed when t
// ends).
func (st streamSetup) dial(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", st.listen, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func TestStreamRouteTraffic(t *testing.T) {
	// After a restart the stored stream route is bound.
	st := boundStreamRoute(t)
	g, s2, two, listen, id := st.g, st.s2, st.two, st.listen, st.id
	if got, err := testgw.TCPSay(listen, "hello"); err != nil || got != "one: hello" {
		t.Fatalf("through the stream route: %q %v", got, err)
	}

	// Changing only the service applies live, on the same listener.
	g.Must("PUT", fmt.Sprintf("/api/v1/stream-routes/%d", id), map[string]any{"name": "tcp", "listen_addr": listen, "service_id": s2})
	if got, err := testgw.TCPSay(listen, "again"); err != nil || got != "two: again" {
		t.Fatalf("after a live service change: %q %v", got, err)
	}
	// Retries reach another target when one is down.
	g.Must("POST", fmt.Sprintf("/api/v1/services/%d/targets", s2), map[string]any{"host": "127.0.0.1", "port": 1})
	for i := 0; i < 4; i++ {
		if got, err := testgw.TCPSay(listen, "r"); err != nil || got != "two: r" {
			t.Fatalf("with a dead target and one retry: %q %v", got, err)
		}
	}
	m := g.Must("GET", "/api/v1/metrics", nil)
	if st := m["streams"].(map[string]any); st["total"].(float64) < 6 {
		t.Fatalf("stream metrics: %v", st)
	}
	// A target that is (or resolves to) a control endpoint is never
	// dialled, whatever passed validation: the dial itself is checked.
	guard.Set("a test's control endpoint", two)
	got, err := testgw.TCPSay(listen, "leak")
	guard.Set("a test's control endpoint")
	if err == nil && got != "" {
		t.Fatalf("a stream reached a control endpoint: %q", got)
	}
	if got, err := testgw.TCPSay(listen, "back"); err != nil || got != "two: back" {
		t.Fatalf("once the endpoint is no control endpoint: %q %v", got, err)
	}
	// Disabled: the listener stays (until restart) but carries nothing.
	g.Must("PUT", fmt.Sprintf("/api/v1/stream-routes/%d", id), map[string]any{"name": "tcp", "listen_addr": listen, "service_id": s2, "enabled": false})
	if got, err := testgw.TCPSay(listen, "x"); err == nil && got != "" {
		t.Fatalf("a disabled stream route answered %q", got)
	}
}

// TestStreamRouteListenerChangesWaitForRestart: which route a stream
// listener serves is fixed at process start, like the listeners: a route
// whose listen_addr changes keeps its listener (with live service
// changes) until a restart binds the new address, and a route created on
// an address another route was bound to at start gets it only at the
// restart too.
func TestStreamRouteListenerChangesWaitForRestart(t *testing.T) {
	st := boundStreamRoute(t)
	g, old := st.g, st.listen
	moved := testgw.FreeAddr(t)
	g.Must("PUT", fmt.Sprintf("/api/v1/stream-routes/%d", st.id), map[string]any{"name": "tcp", "listen_addr": moved, "service_id": st.s2})
	newer := g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "newer", "listen_addr": old, "service_id": st.s1})
	if got, err := testgw.TCPSay(old, "x"); err != nil || got != "two: x" {
		t.Fatalf("the moved route on its listener before a restart: %q %v", got, err)
	}
	if _, err := testgw.TCPSay(moved, "x"); err == nil {
		t.Fatal("a changed listen_addr was bound before a restart")
	}
	m := g.Must("GET", "/api/v1/metrics", nil)["streams"].(map[string]any)
	if m["total"] != 1.0 {
		t.Fatalf("stream metrics: %v", m)
	}

	dsn := g.DSN
	if err := stopGateway(); err != nil {
		t.Fatal(err)
	}
	testgw.Start(t, &testgw.Options{DSN: dsn})
	if got, err := testgw.TCPSay(moved, "y"); err != nil || got != "two: y" {
		t.Fatalf("the moved route after a restart: %q %v", got, err)
	}
	if got, err := testgw.TCPSay(old, "y"); err != nil || got != "one: y" {
		t.Fatalf("stream route %v after a restart: %q %v", newer["id"], got, err)
	}
}

// An open stream connection is the route's too: disabling or deleting the
// route (say, to cut a client off) ends the connections it carries, not
// only new ones; a change of its service leaves them open.
func TestStreamRouteRemovalCutsOpenConnections(t *testing.T) {
	st := boundStreamRoute(t)
	g, s2, listen, id := st.g, st.s2, st.listen, st.id
	path := fmt.Sprintf("/api/v1/stream-routes/%d", id)

	open := func() (net.Conn, *bufio.Reader) { return st.dial(t) }
	say := func(c net.Conn, r *bufio.Reader, line string) (string, error) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
			return "", err
		}
		got, err := r.ReadString('\n')
		return strings.TrimSpace(got), err
	}
	// cut reports whether the gateway ended the connection (EOF or reset,
	// not our deadline).
	cut := func(c net.Conn, r *bufio.Reader) bool {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err := r.ReadString('\n')
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}

	c, r := open()
	if got, err := say(c, r, "a"); err != nil || got != "one: a" {
		t.Fatalf("through the stream route: %q %v", got, err)
	}
	// A service change applies to new connections; the open one stays.
	g.Must("PUT", path, map[string]any{"name": "tcp", "listen_addr": listen, "service_id": s2})
	if got, err := say(c, r, "b"); err != nil || got != "one: b" {
		t.Fatalf("an open connection after a service change: %q %v", got, err)
	}
	g.Must("PUT", path, map[string]any{"name": "tcp", "listen_addr": listen, "service_id": s2, "enabled": false})
	if !cut(c, r) {
		t.Fatal("a connection of a disabled stream route stayed open")
	}

	g.Must("PUT", path, map[string]any{"name": "tcp", "listen_addr": listen, "service_id": s2})
	c, r = open()
	if got, err := say(c, r, "c"); err != nil || got != "two: c" {
		t.Fatalf("re-enabled: %q %v", got, err)
	}
	g.Must("DELETE", path, nil)
	if !cut(c, r) {
		t.Fatal("a connection of a deleted stream route stayed open")
	}
	// The deleted route leaves the per-route series; the process totals
	// keep its connections.
	resp, err := http.Get(g.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	prom, _ := io.ReadAll(resp.Body)
	if label := fmt.Sprintf("stream_route_id=\"%d\"", id); strings.Contains(string(prom), label) {
		t.Fatalf("/metrics still has a series with %s:\n%s", label, prom)
	}
	var m observe.MetricsSnapshot
	if g.JSON("GET", "/api/v1/metrics", nil, &m); m.Streams != (observe.StreamMetrics{Active: 0, Total: 2}) {
		t.Fatalf("streams after the deletion: %+v", m.Streams)
	}
}

// TestStreamIdleTimeout: a stream connection on which neither side sends
// anything for the service's read_timeout_ms is closed by the gateway
// (nginx's proxy_timeout, Kong's service timeouts), one that keeps
// talking is not, and read_timeout_ms 0 never closes an idle one.
func TestStreamIdleTimeout(t *testing.T) {
	st := boundStreamRoute(t)
	g := st.g
	service := fmt.Sprintf("/api/v1/services/%d", st.s1)
	open := func() (net.Conn, *bufio.Reader) { return st.dial(t) }
	say := func(c net.Conn, r *bufio.Reader, line string) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
			t.Fatalf("write %q: %v", line, err)
		}
		if got, err := r.ReadString('\n'); err != nil || strings.TrimSpace(got) != "one: "+line {
			t.Fatalf("say %q: %q %v", line, got, err)
		}
	}

	g.Must("PUT", service, map[string]any{"name": "one", "read_timeout_ms": 300})
	c, r := open()
	for i := range 12 { // 1.2 s of traffic, four times the timeout
		say(c, r, fmt.Sprint(i))
		time.Sleep(100 * time.Millisecond)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || isDeadline(err) {
		t.Fatalf("an idle stream connection stayed open: %v", err)
	}

	g.Must("PUT", service, map[string]any{"name": "one", "read_timeout_ms": 0})
	c, r = open()
	say(c, r, "a")
	time.Sleep(time.Second)
	say(c, r, "b")
}

func isDeadline(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestStreamRouteLoopRefused: a stream route whose service targets a
// stream listener of the gateway itself (its own, or another route's) is
// a loop: each connection accepted would dial the listener again, every
// hop holding two descriptors and goroutines, until the process runs out
// of descriptors (the TCP health check of such a target starts it without
// any client). The dial to a stream listener is refused like one to a
// control endpoint: the client's connection is closed, nothing more.
func TestStreamRouteLoopRefused(t *testing.T) {
	g := testgw.Start(t, nil)
	self, entry := testgw.FreeAddr(t), testgw.FreeAddr(t)
	sid := g.Service("self", self)
	g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "self", "listen_addr": self, "service_id": sid})
	g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "entry", "listen_addr": entry, "service_id": sid})
	dsn := g.DSN
	if err := stopGateway(); err != nil {
		t.Fatal(err)
	}
	testgw.Start(t, &testgw.Options{DSN: dsn})
	streams := controlplane.Current().Streams()
	before := streams.Totals().Total
	for _, addr := range []string{self, entry} {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if err == nil || isDeadline(err) {
			got := streams.Totals()
			streams.Apply(nil, nil) // cut the loop, or the test process runs out of descriptors
			t.Fatalf("a connection to %s whose target is a stream listener was not closed (%v): %d stream connections open, a loop", addr, err, got.Active)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if got := streams.Totals(); got.Total-before > 10 || got.Active != 0 {
		streams.Apply(nil, nil)
		t.Fatalf("two client connections made %d stream connections (%d still open): a loop", got.Total-before, got.Active)
	}
}

// TestStreamRouteNodeListenerCollision: a node whose proxy listeners come
// from its own bootstrap (node_http_listen / node_https_listen, as the
// nodes of a cluster on one host have) refuses a stream route on them
// too, not only on the stored settings' addresses.
func TestStreamRouteNodeListenerCollision(t *testing.T) {
	httpAddr, httpsAddr := testgw.FreeAddr(t), testgw.FreeAddr(t)
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"node_http_listen": httpAddr, "node_https_listen": httpsAddr}})
	sid := g.Service("tcp", "127.0.0.1:9")
	for _, addr := range []string{httpAddr, httpsAddr} {
		st, body := g.Do("POST", "/api/v1/stream-routes", map[string]any{"name": "x", "listen_addr": addr, "service_id": sid})
		wantError(t, st, body, 400, "listen_addr: "+addr+" collides with this node's proxy")
	}
}
