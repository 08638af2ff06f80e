package auth_test

// The SSO feature's outbound requests: discovery, the token exchange and
// the key set are fetched from URLs the provider's discovery document
// names, on behalf of anonymous browsers (start and callback are public).

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/modules/guard"
)

// TestSSOOutboundRefusesOwnEndpoints: the endpoints a provider advertises
// are dialled by the gateway, at the request of any anonymous browser. A
// provider (malicious, compromised, or an issuer an administrator mistyped)
// advertising one of the gateway's own endpoints, such as Caddy's admin
// endpoint (no authentication: POST /stop ends the process) as its
// token_endpoint, must not get the gateway to send it a request: the SSO
// client dials through package guard like every other outbound client.
// A sentinel registered with package guard stands for those endpoints.
func TestSSOOutboundRefusesOwnEndpoints(t *testing.T) {
	var hits atomic.Int64
	sentinel := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "a control endpoint was reached", http.StatusTeapot)
	}))
	defer sentinel.Close()
	guard.Set("sso test sentinel", sentinel.Listener.Addr().String())
	defer guard.Set("sso test sentinel")

	e := start(t)
	idp := newIDP(t)
	adm := e.withToken(e.anon().token())
	adm.want(200, "POST", "/api/v1/users", map[string]any{"email": "alice@example.com", "role": "viewer", "password": "alice-password"})
	cfg := map[string]any{"issuer": idp.Issuer(), "client_id": idp.ClientID, "client_secret": idp.ClientSecret}
	adm.want(200, "PUT", "/api/v1/sso/config", cfg)

	t.Run("token endpoint", func(t *testing.T) {
		idp.Discovery = map[string]any{"token_endpoint": sentinel.URL + "/stop"}
		defer func() { idp.Discovery = nil }()
		adm.want(200, "PUT", "/api/v1/sso/config", cfg) // forgets the cached discovery
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "exchange_failed")
		if n := hits.Load(); n != 0 {
			t.Fatalf("the token exchange reached a control endpoint (%d requests)", n)
		}
	})
	t.Run("key set", func(t *testing.T) {
		idp.Discovery = map[string]any{"jwks_uri": sentinel.URL + "/config/"}
		defer func() { idp.Discovery = nil }()
		adm.want(200, "PUT", "/api/v1/sso/config", cfg)
		wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "invalid_id_token")
		if n := hits.Load(); n != 0 {
			t.Fatalf("the key set was fetched from a control endpoint (%d requests)", n)
		}
	})
	t.Run("issuer", func(t *testing.T) {
		adm.want(200, "PUT", "/api/v1/sso/config", map[string]any{"issuer": sentinel.URL, "client_id": "x"})
		e.anon().want(500, "GET", "/api/v1/auth/sso/start", nil)
		if n := hits.Load(); n != 0 {
			t.Fatalf("discovery reached a control endpoint (%d requests)", n)
		}
	})
	// The control: the same provider, advertising its own endpoints, works.
	adm.want(200, "PUT", "/api/v1/sso/config", cfg)
	if a := ssoFlow(t, e.browser(), idp, nil); a.Header.Get("Location") != "/" {
		t.Fatalf("sign-in: %q", a.Header.Get("Location"))
	}
}

// TestSSOProviderAnswersAreBounded: go-oidc reads the discovery document
// and the key set whole (io.ReadAll). A provider answering an endless body
// held up to the client's timeout's worth of it in memory per request (at
// loopback or LAN speed, gigabytes in 10 s). Answers over 1 MiB (the
// bound golang.org/x/oauth2 puts on token answers) are refused; the
// padding here stands for an endless body, whose read the bound stops.
func TestSSOProviderAnswersAreBounded(t *testing.T) {
	e := start(t)
	idp := newIDP(t)
	adm := e.withToken(e.anon().token())
	adm.want(200, "POST", "/api/v1/users", map[string]any{"email": "alice@example.com", "role": "viewer", "password": "alice-password"})
	cfg := map[string]any{"issuer": idp.Issuer(), "client_id": idp.ClientID, "client_secret": idp.ClientSecret}
	adm.want(200, "PUT", "/api/v1/sso/config", cfg)

	// Within the bound (100 KiB of padding): accepted.
	idp.Discovery = map[string]any{"x-padding": strings.Repeat("x", 100<<10)}
	idp.JWKSPadding = 100 << 10
	if a := ssoFlow(t, e.browser(), idp, nil); a.Header.Get("Location") != "/" {
		t.Fatalf("sign-in with 100 KiB answers: %q", a.Header.Get("Location"))
	}

	idp.Discovery = map[string]any{"x-padding": strings.Repeat("x", 2<<20)}
	idp.JWKSPadding = 0
	adm.want(200, "PUT", "/api/v1/sso/config", cfg)
	e.anon().want(500, "GET", "/api/v1/auth/sso/start", nil)

	idp.Discovery = nil
	idp.JWKSPadding = 2 << 20
	adm.want(200, "PUT", "/api/v1/sso/config", cfg)
	wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "invalid_id_token")
}

// TestSSODiscoveryFailureIsShared: the provider cache held its lock for the
// whole discovery request and did not remember failures, so while the
// provider was slow to fail, every sign-in start (public: any anonymous
// client) queued behind the others, each waiting for its own discovery in
// turn, whether or not its client was still there: N requests held N
// goroutines for N times the provider's delay. Requests arriving while a
// discovery is under way wait for that one.
func TestSSODiscoveryFailureIsShared(t *testing.T) {
	e := start(t)
	idp := newIDP(t)
	adm := e.withToken(e.anon().token())
	adm.want(200, "PUT", "/api/v1/sso/config", map[string]any{"issuer": idp.Issuer(), "client_id": idp.ClientID})
	const delay, n = 1500 * time.Millisecond, 5
	idp.mu.Lock()
	idp.DiscoveryDelay, idp.DiscoveryStatus = delay, http.StatusServiceUnavailable
	idp.mu.Unlock()

	begin := time.Now()
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.anon().do("GET", "/api/v1/auth/sso/start", nil).Status
		}()
	}
	wg.Wait()
	took := time.Since(begin)
	for i, st := range statuses {
		if st != 500 {
			t.Fatalf("start %d: status %d, want 500", i, st)
		}
	}
	if took > 2*delay+500*time.Millisecond {
		t.Fatalf("%d concurrent starts took %v with a provider failing after %v: they waited for each other's discovery", n, took, delay)
	}
	idp.mu.Lock()
	asked := idp.Discoveries
	idp.DiscoveryDelay, idp.DiscoveryStatus = 0, 0
	idp.mu.Unlock()
	if asked > 2 {
		t.Fatalf("%d concurrent starts asked the provider %d times", n, asked)
	}
	// The provider back: the next start discovers it again.
	e.anon().want(303, "GET", "/api/v1/auth/sso/start", nil)
}
