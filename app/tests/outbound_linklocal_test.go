package tests

import (
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestTrustOutboundRefusesLinkLocal: service targets, http-log endpoints
// and the upstream probe refuse link-local and cloud metadata addresses
// (400 naming the field) until settings allow_link_local_destinations is
// true; a name resolving there is refused when dialled (modules/guard's
// unit tests: no test sends a packet off the loopback, so nothing here is
// ever dialled: the one configuration accepted is an http-log endpoint of
// a route no request reaches).
func TestTrustOutboundRefusesLinkLocal(t *testing.T) {
	g, sid := echoGateway(t)
	rid := g.Route("quiet", sid, testgw.Paths("/quiet"))

	var settings map[string]any
	if st := g.JSON("GET", "/api/v1/settings", nil, &settings); st != 200 {
		t.Fatalf("GET settings: %d", st)
	}
	if v, ok := settings["allow_link_local_destinations"]; !ok || v != false {
		t.Fatalf("allow_link_local_destinations = %v (present %v), want false by default", v, ok)
	}

	for _, c := range []struct{ target, url string }{
		{"169.254.169.254", "169.254.169.254"},
		{"169.254.0.1", "169.254.0.1:8080"},
		{"fe80::1", "[fe80::1]"},
		{"fd00:ec2::254", "[fd00:ec2::254]"},
		{"100.100.100.200", "100.100.100.200"},
		{"::ffff:169.254.169.254", "[::ffff:169.254.169.254]"},
	} {
		g.WantError(400, "POST", "/api/v1/services/"+itoa(sid)+"/targets", map[string]any{"host": c.target, "port": 80},
			"host", "link-local", "allow_link_local_destinations")
		g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "route", "route_id": rid,
			"config": map[string]any{"endpoint": "http://" + c.url + "/latest/meta-data/"}}, "config.endpoint", "link-local")
		g.WantError(400, "POST", "/api/v1/applications/test-upstream", map[string]any{"upstream_url": "http://" + c.url}, "upstream_url", "link-local")
		g.WantError(400, "POST", "/api/v1/applications", map[string]any{"name": "meta", "domain": "meta.example.com", "upstream_url": "http://" + c.url}, "upstream_url", "link-local")
	}
	// A target's update is checked too.
	targets := g.List("/api/v1/services/" + itoa(sid) + "/targets")
	if len(targets) == 0 {
		t.Fatal("the echo service has no target")
	}
	tid := itoa(testgw.ID(targets[0]))
	g.WantError(400, "PUT", "/api/v1/targets/"+tid, map[string]any{"host": "169.254.169.254", "port": 80}, "host")

	// The admin setting allows them.
	settings["allow_link_local_destinations"] = true
	delete(settings, "updated_at")
	g.Must("PUT", "/api/v1/settings", settings)
	defer func() {
		settings["allow_link_local_destinations"] = false
		g.Must("PUT", "/api/v1/settings", settings)
	}()
	pid := testgw.ID(g.Must("POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "route", "route_id": rid,
		"config": map[string]any{"endpoint": "http://169.254.169.254/latest/meta-data/"}}))
	g.Must("DELETE", "/api/v1/plugins/"+itoa(pid), nil)

	// And again not.
	settings["allow_link_local_destinations"] = false
	g.Must("PUT", "/api/v1/settings", settings)
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "http-log", "scope": "route", "route_id": rid,
		"config": map[string]any{"endpoint": "http://169.254.169.254/latest/meta-data/"}}, "config.endpoint")
	if p := send(t, g, "GET", "/quiet", nil); p.Status != 200 {
		t.Fatalf("proxied: %d %s", p.Status, p.Body)
	}
}
