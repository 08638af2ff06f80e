package tests

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/caddy-gateway/gateway/adminext/controlplane"
	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

func TestMetrics(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("ok", sid, testgw.Paths("/ok"))
	dead := g.DeadService("dead")
	rdead := g.Route("dead", dead, testgw.Paths("/dead"))
	for i := 0; i < 3; i++ {
		g.Get("", "/ok")
	}
	g.Get("", "/dead")
	g.Get("", "/nowhere")

	m := g.Must("GET", "/api/v1/metrics", nil)
	status := m["status"].(map[string]any)
	if m["total_requests"] != 5.0 || m["unmatched_requests"] != 1.0 || status["2xx"] != 3.0 || status["4xx"] != 1.0 ||
		status["5xx"] != 1.0 || m["latency_window"] != 1024.0 {
		t.Fatalf("metrics: %v", m)
	}
	lat := m["latency_ms"].(map[string]any)
	if lat["p50"].(float64) <= 0 || lat["p99"].(float64) < lat["p50"].(float64) {
		t.Fatalf("latency: %v", lat)
	}
	routes := map[float64]map[string]any{}
	for _, r := range m["routes"].([]any) {
		rm := r.(map[string]any)
		routes[rm["route_id"].(float64)] = rm
	}
	if routes[float64(rid)]["requests"] != 3.0 || routes[float64(rid)]["errors"] != 0.0 || routes[float64(rdead)]["errors"] != 1.0 {
		t.Fatalf("route metrics: %v", routes)
	}

	resp, err := http.Get(g.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.LegacyValidation) // what promtool accepts
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics is not valid text exposition: %v", err)
	}
	for _, name := range []string{"gateway_requests_total", "gateway_responses_total", "gateway_unmatched_requests_total",
		"gateway_request_duration_seconds", "gateway_recent_latency_seconds", "gateway_route_requests_total",
		"gateway_route_errors_total", "gateway_target_healthy"} {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if v := fams["gateway_requests_total"].GetMetric()[0].GetCounter().GetValue(); v != 5 {
		t.Fatalf("gateway_requests_total = %v", v)
	}
	// Every series names its node (the id of GET /api/v1/cluster).
	node := controlplane.Current().NodeID()
	if !strings.Contains(string(body), fmt.Sprintf(`gateway_route_requests_total{node=%q,route="ok",route_id="%d"} 3`, node, rid)) {
		t.Fatalf("route series missing:\n%s", body)
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "node" && l.GetValue() == node }) {
				t.Fatalf("%s without the node label: %v", name, m)
			}
		}
	}
}
