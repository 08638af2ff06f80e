package tests

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestJWTTimeClaimsWhenPresent: exp and nbf are honoured whenever a token
// carries them (RFC 7519 4.1.4, 4.1.5), listed in claims_to_verify or not,
// within leeway_s.
func TestJWTTimeClaimsWhenPresent(t *testing.T) {
	g, sid := echoGateway(t)
	r := g.PathRoutes(sid, "/def", "/none", "/lee")
	addPlugin(t, g, "jwt", "route", r[0], nil)
	addPlugin(t, g, "jwt", "route", r[1], map[string]any{"claims_to_verify": []string{}})
	addPlugin(t, g, "jwt", "route", r[2], map[string]any{"leeway_s": 60})
	g.Consumer("dave", map[string]any{"type": "jwt", "key": "hs-iss", "secret": "hs-secret"})
	now := time.Now()
	tok := func(claims jwt.MapClaims) string {
		claims["iss"] = "hs-iss"
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("hs-secret"))
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	exp := now.Add(time.Hour).Unix()
	status := func(path string, claims jwt.MapClaims) int {
		t.Helper()
		return send(t, g, "GET", path, nil, "Authorization", tok(claims)).Status
	}
	for _, tc := range []struct {
		path   string
		claims jwt.MapClaims
		want   int
	}{
		{"/def", jwt.MapClaims{"exp": exp}, 200},
		{"/def", jwt.MapClaims{"exp": exp, "nbf": now.Add(-time.Minute).Unix()}, 200},
		{"/def", jwt.MapClaims{"exp": exp, "nbf": now.Add(time.Hour).Unix()}, 401},
		{"/def", jwt.MapClaims{"exp": exp, "nbf": now.Add(10 * time.Second).Unix()}, 401},
		{"/none", jwt.MapClaims{}, 200},
		{"/none", jwt.MapClaims{"nbf": now.Add(time.Hour).Unix()}, 401},
		{"/none", jwt.MapClaims{"exp": now.Add(-time.Hour).Unix()}, 401},
		{"/lee", jwt.MapClaims{"exp": exp, "nbf": now.Add(10 * time.Second).Unix()}, 200},
		{"/lee", jwt.MapClaims{"exp": now.Add(-10 * time.Second).Unix()}, 200},
		{"/lee", jwt.MapClaims{"exp": exp, "nbf": now.Add(5 * time.Minute).Unix()}, 401},
		{"/lee", jwt.MapClaims{"exp": now.Add(-5 * time.Minute).Unix()}, 401},
	} {
		if got := status(tc.path, tc.claims); got != tc.want {
			t.Errorf("%s %v: %d, want %d", tc.path, tc.claims, got, tc.want)
		}
	}
	p := send(t, g, "GET", "/none", nil, "Authorization", tok(jwt.MapClaims{"nbf": now.Add(time.Hour).Unix()}))
	wantGatewayError(t, p, 401, "token not valid yet")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "jwt", "scope": "global", "config": map[string]any{"leeway_s": 301}}, "config.leeway_s")
	g.WantError(400, "POST", "/api/v1/plugins", map[string]any{"type": "jwt", "scope": "global", "config": map[string]any{"leeway_s": -1}}, "config.leeway_s")
}
