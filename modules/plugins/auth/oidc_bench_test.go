package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// BenchmarkOpenIDConnectBearer is the plugin's cost per request for a
// client sending the same valid bearer JWT each time (key set and
// verification cached: no call to the provider, no signature check per
// request), against the bare handler chain ("bare": the next handler
// only). bench/README.md has the figures.
func BenchmarkOpenIDConnectBearer(b *testing.B) {
	op := newTestOP(&testing.T{})
	defer op.Close()
	o := new(OpenIDConnect)
	o.SetDefaults()
	o.Issuer, o.ClientID, o.BearerOnly = op.URL, "api", true
	o.Consumers = fixtures(&testing.T{})
	if err := o.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	defer o.Cleanup()
	tok := op.sign(&testing.T{}, op.claims(nil))
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	req := func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return r
	}
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			_ = next.ServeHTTP(httptest.NewRecorder(), req())
		}
	})
	b.Run("openid-connect", func(b *testing.B) {
		for b.Loop() {
			w := httptest.NewRecorder()
			_ = o.ServeHTTP(w, req(), next)
			if w.Code != http.StatusNoContent {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
	b.Run("openid-connect-uncached", func(b *testing.B) {
		for b.Loop() {
			o.verified = newTokenCache()
			w := httptest.NewRecorder()
			_ = o.ServeHTTP(w, req(), next)
			if w.Code != http.StatusNoContent {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
}
