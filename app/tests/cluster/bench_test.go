package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// BenchmarkPropagation: 100 route changes on node 1, each timed from node
// 1's answer until node 3 serves the change (polled every 1 ms, so the
// figures include up to 1 ms of polling granularity). Reports p50 and p99
// in milliseconds (bench/README.md). Run with -benchtime=1x.
func BenchmarkPropagation(b *testing.B) {
	_, nodes := threeNodes(b)
	n1, n3 := nodes[0], nodes[2]
	sid := service(n1, "bench", upstream(b, "bench"))
	rid := testgw.ID(n1.must("POST", "/api/v1/routes", map[string]any{"name": "bench", "service_id": sid, "paths": []string{"/p0"}}))
	n3.waitServes("/p0", "bench /p0", 5*time.Second)
	const changes = 100
	for b.Loop() {
		var lat []time.Duration
		for i := 1; i <= changes; i++ {
			path := fmt.Sprintf("/p%d", i)
			n1.must("PUT", fmt.Sprintf("/api/v1/routes/%d", rid), map[string]any{"name": "bench", "service_id": sid, "paths": []string{path}})
			start := time.Now()
			for {
				if st, _ := n3.get(path); st == 200 {
					break
				}
				if time.Since(start) > 5*time.Second {
					b.Fatalf("change %d not served by node 3 within 5 s", i)
				}
				time.Sleep(time.Millisecond)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(lat[(len(lat)+1)/2-1]), "p50-ms")
		b.ReportMetric(ms(lat[(len(lat)*99+99)/100-1]), "p99-ms") // nearest rank
		b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	}
}
