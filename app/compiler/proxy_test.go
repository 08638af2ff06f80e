package compiler

import (
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/storage"
)

// Every row field the compiled proxy depends on changes the proxy's cache
// key, so a change of it compiles the proxy again; a field the proxy does
// not read (health_path, name) keeps the compiled bytes.
func TestProxyKeyFollowsTheRows(t *testing.T) {
	sni := "a.test"
	base := func() (*storage.Service, []storage.Target) {
		return &storage.Service{ID: 1, Name: "s", Protocol: "https", ConnectTimeoutMS: 1, ReadTimeoutMS: 2, WriteTimeoutMS: 3,
				Retries: 1, LBAlgorithm: "weighted", TLSSNI: &sni, UpdatedAt: time.Unix(1, 0)},
			[]storage.Target{{ID: 1, ServiceID: 1, Host: "h", Port: 1, Weight: 1, Enabled: true, UpdatedAt: time.Unix(1, 0)}}
	}
	s0, t0 := base()
	key := string(proxyKey(nil, s0, t0))
	other := "b.test"
	for name, change := range map[string]func(*storage.Service, []storage.Target) []storage.Target{
		"protocol": func(s *storage.Service, ts []storage.Target) []storage.Target { s.Protocol = "http"; return ts },
		"connect":  func(s *storage.Service, ts []storage.Target) []storage.Target { s.ConnectTimeoutMS++; return ts },
		"read":     func(s *storage.Service, ts []storage.Target) []storage.Target { s.ReadTimeoutMS++; return ts },
		"write":    func(s *storage.Service, ts []storage.Target) []storage.Target { s.WriteTimeoutMS++; return ts },
		"retries":  func(s *storage.Service, ts []storage.Target) []storage.Target { s.Retries++; return ts },
		"lb":       func(s *storage.Service, ts []storage.Target) []storage.Target { s.LBAlgorithm = "random"; return ts },
		"sni":      func(s *storage.Service, ts []storage.Target) []storage.Target { s.TLSSNI = &other; return ts },
		"no sni":   func(s *storage.Service, ts []storage.Target) []storage.Target { s.TLSSNI = nil; return ts },
		"updated": func(s *storage.Service, ts []storage.Target) []storage.Target {
			s.UpdatedAt = time.Unix(2, 0)
			return ts
		},
		"target host": func(s *storage.Service, ts []storage.Target) []storage.Target { ts[0].Host = "h2"; return ts },
		"target port": func(s *storage.Service, ts []storage.Target) []storage.Target { ts[0].Port = 2; return ts },
		"weight":      func(s *storage.Service, ts []storage.Target) []storage.Target { ts[0].Weight = 2; return ts },
		"disabled":    func(s *storage.Service, ts []storage.Target) []storage.Target { ts[0].Enabled = false; return ts },
		"target stamp": func(s *storage.Service, ts []storage.Target) []storage.Target {
			ts[0].UpdatedAt = time.Unix(2, 0)
			return ts
		},
		"target id": func(s *storage.Service, ts []storage.Target) []storage.Target { ts[0].ID = 2; return ts },
		"added":     func(s *storage.Service, ts []storage.Target) []storage.Target { return append(ts, ts[0]) },
		"removed":   func(s *storage.Service, ts []storage.Target) []storage.Target { return nil },
	} {
		s, ts := base()
		ts = change(s, ts)
		if string(proxyKey(nil, s, ts)) == key {
			t.Errorf("%s: the proxy key did not change", name)
		}
	}
	s, ts := base()
	s.Name = "renamed"
	if string(proxyKey(nil, s, ts)) != key {
		t.Error("a field the proxy does not read changed the key")
	}
}

// A compile reuses the previous compile's bytes for unchanged services and
// compiles changed ones again.
func TestCompileProxiesReusesUnchanged(t *testing.T) {
	svcs := []storage.Service{{ID: 1, Protocol: "http", LBAlgorithm: "round_robin"}, {ID: 2, Protocol: "http", LBAlgorithm: "round_robin"}}
	idx := &snapIndex{services: map[int64]*storage.Service{1: &svcs[0], 2: &svcs[1]}, targets: map[int64][]storage.Target{
		1: {{ID: 1, ServiceID: 1, Host: "127.0.0.1", Port: 1, Weight: 1, Enabled: true}},
		2: {{ID: 2, ServiceID: 2, Host: "127.0.0.1", Port: 2, Weight: 1, Enabled: true}},
	}}
	first := &Compiled{}
	p1, err := compileProxies([]int64{1, 2}, idx, nil, first)
	if err != nil {
		t.Fatal(err)
	}
	idx.targets[2][0].Port = 3
	next := &Compiled{}
	p2, err := compileProxies([]int64{1, 2}, idx, first.Proxies, next)
	if err != nil {
		t.Fatal(err)
	}
	if &p2[1][0] != &p1[1][0] {
		t.Error("the unchanged service was compiled again")
	}
	if string(p2[2]) == string(p1[2]) {
		t.Error("the changed service kept its old proxy")
	}
	if _, err := compileProxies([]int64{3}, idx, next.Proxies, &Compiled{}); err == nil {
		t.Error("a route to a missing service compiled")
	}
}
