package lb

import (
	"fmt"
	"strings"
	"testing"
)

// health marks the listed addresses unhealthy.
type health map[string]bool

func (h health) Healthy(_ int64, addr string) bool { return !h[addr] }

func TestRoundRobinCycles(t *testing.T) {
	b := &Balancer{}
	cands := []string{"a", "b", "c"}
	var got []string
	for range 7 {
		got = append(got, cands[b.Pick(cands, "")])
	}
	if s := strings.Join(got, ""); s != "abcabca" {
		t.Fatalf("round robin picked %s", s)
	}
	if i := b.Pick(nil, ""); i != -1 {
		t.Fatalf("no candidates: picked %d", i)
	}
}

// The smooth weighted order for weights 5, 1, 1 is nginx's: a a b a c a a.
func TestWeightedIsSmooth(t *testing.T) {
	b := &Balancer{Algorithm: "weighted", Weights: map[string]int{"a": 5, "b": 1, "c": 1}}
	cands := []string{"a", "b", "c"}
	var got []string
	for range 14 {
		got = append(got, cands[b.Pick(cands, "")])
	}
	if s := strings.Join(got, ""); s != "aabacaa"+"aabacaa" {
		t.Fatalf("weighted picked %s", s)
	}
}

func TestConsistentMovesOnlyRemovedTargetsClients(t *testing.T) {
	b := &Balancer{Algorithm: "consistent"}
	all := []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}
	without := []string{"10.0.0.1:80", "10.0.0.3:80"} // 10.0.0.2 removed
	perTarget := map[string]int{}
	for i := range 300 {
		ip := fmt.Sprintf("192.0.2.%d", i%250)
		before := all[b.Pick(all, ip)]
		if again := all[b.Pick(all, ip)]; again != before {
			t.Fatalf("%s moved from %s to %s with the same targets", ip, before, again)
		}
		perTarget[before]++
		after := without[b.Pick(without, ip)]
		if before != "10.0.0.2:80" && after != before {
			t.Fatalf("%s moved from %s to %s when another target left", ip, before, after)
		}
	}
	for _, a := range all {
		if perTarget[a] < 50 {
			t.Fatalf("clients spread badly over the targets: %v", perTarget)
		}
	}
}

func TestRandomStaysInRange(t *testing.T) {
	b := &Balancer{Algorithm: "random"}
	cands := []string{"a", "b"}
	seen := map[int]bool{}
	for range 200 {
		i := b.Pick(cands, "")
		if i < 0 || i >= len(cands) {
			t.Fatalf("random picked %d of %d", i, len(cands))
		}
		seen[i] = true
	}
	if len(seen) != 2 {
		t.Fatalf("random never picked one of two targets in 200 picks: %v", seen)
	}
}

func TestEligible(t *testing.T) {
	b := &Balancer{Algorithm: "weighted", Weights: map[string]int{"a": 1, "b": 0}, Health: health{"c": true}}
	for _, c := range []struct {
		addr        string
		healthyOnly bool
		want        bool
	}{
		{"a", true, true},
		{"b", false, false}, // weight 0 takes no traffic, healthy or not
		{"c", false, false}, // no weight listed
	} {
		if got := b.Eligible(c.addr, c.healthyOnly); got != c.want {
			t.Errorf("weighted Eligible(%s, %v) = %v", c.addr, c.healthyOnly, got)
		}
	}
	rr := &Balancer{Health: health{"c": true}}
	if rr.Eligible("c", true) || !rr.Eligible("c", false) || !rr.Eligible("a", true) {
		t.Fatal("round robin: an unhealthy target is skipped only when healthy targets are required")
	}
	if !(&Balancer{}).Eligible("x", true) {
		t.Fatal("without a health source every target is healthy")
	}
}
