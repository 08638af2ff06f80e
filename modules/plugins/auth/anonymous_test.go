package auth

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// anonymous: a request without credentials passes as the anonymous
// consumer (X-Anonymous-Consumer: true); invalid credentials are still
// refused; a client cannot send the mark itself.
func TestAnonymousConsumer(t *testing.T) {
	op := newTestOP(t)
	for name, h := range map[string]map[string]any{
		"key-auth":       with("gateway_key_auth", map[string]any{"anonymous": "carol"}, t),
		"basic-auth":     with("gateway_basic_auth", map[string]any{"anonymous": "3"}, t), // by id
		"jwt":            with("gateway_jwt", map[string]any{"anonymous": "carol"}, t),
		"openid-connect": oidcHandler(t, op, map[string]any{"anonymous": "carol"}),
	} {
		t.Run(name, func(t *testing.T) {
			g := plugintest.Start(t, []any{h})
			resp, _ := get(t, g, "/", map[string]string{"X-Anonymous-Consumer": "false", "X-Consumer-Username": "alice"})
			up := g.Upstream.Last()
			if resp.StatusCode != 200 || up.Header.Get("X-Consumer-Username") != "carol" || up.Header.Get("X-Anonymous-Consumer") != "true" {
				t.Fatalf("no credentials: %d %v", resp.StatusCode, up.Header)
			}
			bad := map[string]map[string]string{
				"key-auth":       {"apikey": "wrong"},
				"basic-auth":     {"Authorization": "Basic YWxpY2U6d3Jvbmc="},
				"jwt":            bearer("not.a.token"),
				"openid-connect": bearer("not.a.token"),
			}[name]
			if resp, _ := get(t, g, "/", bad); resp.StatusCode != 401 {
				t.Fatalf("invalid credentials: %d, want 401", resp.StatusCode)
			}
			good := map[string]map[string]string{
				"key-auth":       {"apikey": "alice-key", "X-Anonymous-Consumer": "true"},
				"basic-auth":     {"Authorization": "Basic YWxpY2U6YWxpY2UtcHc=", "X-Anonymous-Consumer": "true"},
				"jwt":            {"Authorization": "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("alice-secret"), jwt.MapClaims{"iss": "alice-iss", "exp": time.Now().Add(time.Hour).Unix()}), "X-Anonymous-Consumer": "true"},
				"openid-connect": {"Authorization": "Bearer " + op.sign(t, op.claims(nil)), "X-Anonymous-Consumer": "true"},
			}[name]
			resp, _ = get(t, g, "/", good)
			up = g.Upstream.Last()
			if resp.StatusCode != 200 || up.Header.Get("X-Consumer-Username") != "alice" || up.Header.Get("X-Anonymous-Consumer") != "" {
				t.Fatalf("valid credentials: %d %v", resp.StatusCode, up.Header)
			}
		})
	}
}

// Several auth plugins with anonymous compose as "any of them": either
// credential authenticates, none gives the anonymous consumer, and an
// invalid one is refused.
func TestAnonymousAnyOf(t *testing.T) {
	g := plugintest.Start(t, []any{
		with("gateway_key_auth", map[string]any{"anonymous": "carol"}, t),
		with("gateway_jwt", map[string]any{"anonymous": "carol"}, t),
		map[string]any{"handler": "gateway_acl", "allow": []string{"admins", "guests"}},
	})
	bobTok := sign(t, jwt.SigningMethodRS256, rsaKey, jwt.MapClaims{"iss": "bob-rs", "exp": time.Now().Add(time.Hour).Unix()})
	for _, tc := range []struct {
		name   string
		h      map[string]string
		status int
		user   string
	}{
		{"key", map[string]string{"apikey": "alice-key"}, 200, "alice"},
		{"jwt", bearer(bobTok), 200, "bob"},
		{"both", map[string]string{"apikey": "alice-key", "Authorization": "Bearer " + bobTok}, 200, "alice"},
		{"none: carol, not in the acl", nil, 403, ""},
		{"invalid key", map[string]string{"apikey": "nope"}, 401, ""},
		{"invalid token", bearer("x.y.z"), 401, ""},
	} {
		resp, _ := get(t, g, "/", tc.h)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.status)
			continue
		}
		if tc.user != "" {
			if got := g.Upstream.Last().Header.Get("X-Consumer-Username"); got != tc.user {
				t.Errorf("%s: consumer %q, want %q", tc.name, got, tc.user)
			}
		}
	}

	// An anonymous name that matches no consumer is a configuration
	// error: 500, never a pass.
	g2 := plugintest.Start(t, []any{with("gateway_key_auth", map[string]any{"anonymous": "ghost"}, t)})
	if resp, _ := get(t, g2, "/", nil); resp.StatusCode != 500 {
		t.Fatalf("unknown anonymous consumer: %d", resp.StatusCode)
	}
}
