package health

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/poll"
	"github.com/caddy-gateway/gateway/internal/tcptest"
)

// countingListener accepts TCP connections on 127.0.0.1 and counts them.
func countingListener(t *testing.T) (host string, port int, accepted *atomic.Int64) {
	accepted = new(atomic.Int64)
	addr := tcptest.Serve(t, func(c net.Conn) { accepted.Add(1); c.Close() })
	h, p, _ := net.SplitHostPort(addr)
	port, _ = strconv.Atoi(p)
	return h, port, accepted
}

func allHealthy(r *Registry, n int) func() bool {
	return func() bool {
		st := r.Statuses()
		if len(st) != n {
			return false
		}
		for _, s := range st {
			if s.State != Healthy {
				return false
			}
		}
		return true
	}
}

// Targets of many services on one backend are checked once per interval,
// each keeps its own identity in the statuses, and the shared check stops
// only with its last target.
func TestTargetsOnOneBackendShareTheirCheck(t *testing.T) {
	host, port, accepted := countingListener(t)
	r := NewRegistry(time.Hour) // only the first check runs in the test
	defer r.Stop()
	const services = 50
	var specs []Spec
	for i := int64(1); i <= services; i++ {
		specs = append(specs, Spec{ServiceID: i, TargetID: 100 + i, Host: host, Port: port})
	}
	r.Sync(specs)
	poll.Until(t, "every target healthy", allHealthy(r, services))
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d services on one backend made %d checks, want 1", services, n)
	}
	st, ok := r.Status(7, net.JoinHostPort(host, strconv.Itoa(port)))
	if !ok || st.ServiceID != 7 || st.TargetID != 107 {
		t.Fatalf("status of service 7 = %+v, %v; want its own ids", st, ok)
	}

	// A target checked differently (an HTTP path) gets a check of its own.
	r.Sync(append(specs, Spec{ServiceID: services + 1, TargetID: 1, Host: host, Port: port, Path: "/health"}))
	poll.Until(t, "a second check", func() bool { return accepted.Load() >= 2 })
	checks := accepted.Load()

	// Dropping all but one target keeps the shared probe: no new check.
	r.Sync(specs[:1])
	if got := len(r.probes); got != 1 {
		t.Fatalf("%d probes after keeping one target, want 1", got)
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load(); n != checks {
		t.Fatalf("keeping a target started %d checks, want none", n-checks)
	}
	p := r.checkers[key{1, specs[0].Addr()}].probe
	r.Sync(nil)
	if p.ctx.Err() == nil || len(r.probes) != 0 {
		t.Fatal("the last target's removal did not stop its probe")
	}
}

// A change of interval reaches the running probes (the gateway option
// health_interval, applied at a reload), and they keep their state.
func TestSetIntervalReachesRunningProbes(t *testing.T) {
	host, port, accepted := countingListener(t)
	r := NewRegistry(time.Hour)
	defer r.Stop()
	r.Sync([]Spec{{ServiceID: 1, TargetID: 1, Host: host, Port: port}})
	poll.Until(t, "the first check", allHealthy(r, 1))

	r.SetInterval(10 * time.Millisecond)
	poll.Until(t, "checks every 10 ms", func() bool { return accepted.Load() >= 5 })
	if !allHealthy(r, 1)() {
		t.Fatal("the probe lost its state")
	}

	r.SetInterval(time.Hour)
	time.Sleep(50 * time.Millisecond) // the check the change starts
	n := accepted.Load()
	time.Sleep(100 * time.Millisecond)
	if got := accepted.Load(); got != n {
		t.Fatalf("%d checks after going back to an hour", got-n)
	}
}
