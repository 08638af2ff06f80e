package tests

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// Helpers of the plugins_*_test.go files: plugin behaviour checked through
// the real gateway (admin API, compiled router, the gateway's own proxy
// listener).

// proxied is one answer of the gateway's proxy listener.
type proxied = testgw.Answer

// errorMessage decodes a plugin's {error: message} body ("" when the body
// is not that shape).
func errorMessage(p proxied) string {
	var e map[string]any
	if json.Unmarshal([]byte(p.Body), &e) != nil {
		return ""
	}
	s, _ := e["error"].(string)
	return s
}

// send sends a proxied request (testgw's Proxy).
func send(t testing.TB, g *testgw.Gateway, method, path string, body io.Reader, hdr ...string) proxied {
	t.Helper()
	return g.Proxy(t, method, path, body, hdr...)
}

// addPlugin creates a plugin; scope is "global", or "route"/"service" with
// the target id.
func addPlugin(t testing.TB, g *testgw.Gateway, typ, scope string, target int64, cfg map[string]any) int64 {
	t.Helper()
	body := map[string]any{"type": typ, "scope": scope}
	switch scope {
	case "route":
		body["route_id"] = target
	case "service":
		body["service_id"] = target
	}
	if cfg != nil {
		body["config"] = cfg
	}
	return testgw.ID(g.Must("POST", "/api/v1/plugins", body))
}

// wantGatewayError checks a plugin's answer: status and {error: message}.
func wantGatewayError(t testing.TB, p proxied, status int, msg string) {
	t.Helper()
	if p.Status != status {
		t.Fatalf("status %d, want %d: %s", p.Status, status, p.Body)
	}
	if got := errorMessage(p); got == "" || (msg != "" && got != msg) {
		t.Fatalf("body %q, want {error: %q}", p.Body, msg)
	}
	if ct := p.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q of an error answer", ct)
	}
}
