package tests

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

// tcpEcho answers each line with name + ": " + line.
func tcpEcho(t *testing.T, name string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "%s: %s\n", name, sc.Text())
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func tcpSay(t *testing.T, addr, line string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "%s\n", line)
	got, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(got), err
}

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

func TestStreamRouteTraffic(t *testing.T) {
	g := testgw.Start(t, nil)
	one, two := tcpEcho(t, "one"), tcpEcho(t, "two")
	s1, s2 := g.Service("one", one), g.Service("two", two)
	listen := testgw.FreeAddr(t)
	id := testgw.ID(g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "tcp", "listen_addr": listen, "service_id": s1}))
	if _, err := tcpSay(t, listen, "hi"); err == nil {
		t.Fatal("a new listen_addr was bound before a restart")
	}

	// Restart: the stored stream route binds.
	dsn := g.DSN
	if err := stopGateway(); err != nil {
		t.Fatal(err)
	}
	g = testgw.Start(t, &testgw.Options{DSN: dsn})
	if got, err := tcpSay(t, listen, "hello"); err != nil || got != "one: hello" {
		t.Fatalf("through the stream route: %q %v", got, err)
	}

	// Changing only the service applies live, on the same listener.
	g.Must("PUT", fmt.Sprintf("/api/v1/stream-routes/%d", id), map[string]any{"name": "tcp", "listen_addr": listen, "service_id": s2})
	if got, err := tcpSay(t, listen, "again"); err != nil || got != "two: again" {
		t.Fatalf("after a live service change: %q %v", got, err)
	}
	// Retries reach another target when one is down.
	g.Must("POST", fmt.Sprintf("/api/v1/services/%d/targets", s2), map[string]any{"host": "127.0.0.1", "port": 1})
	for i := 0; i < 4; i++ {
		if got, err := tcpSay(t, listen, "r"); err != nil || got != "two: r" {
			t.Fatalf("with a dead target and one retry: %q %v", got, err)
		}
	}
	m := g.Must("GET", "/api/v1/metrics", nil)
	if st := m["streams"].(map[string]any); st["total"].(float64) < 6 {
		t.Fatalf("stream metrics: %v", st)
	}
	// Disabled: the listener stays (until restart) but carries nothing.
	g.Must("PUT", fmt.Sprintf("/api/v1/stream-routes/%d", id), map[string]any{"name": "tcp", "listen_addr": listen, "service_id": s2, "enabled": false})
	if got, err := tcpSay(t, listen, "x"); err == nil && got != "" {
		t.Fatalf("a disabled stream route answered %q", got)
	}
}
