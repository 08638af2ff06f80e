package auth_test

// The SSO feature's outbound requests: discovery, the token exchange and
// the key set are fetched from URLs the provider's discovery document
// names, on behalf of anonymous browsers (start and callback are public).

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/storage"
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
	sentinel := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "a control endpoint was reached", http.StatusTeapot)
	})
	guard.Set("sso test sentinel", sentinel.Listener.Addr().String())
	defer guard.Set("sso test sentinel")

	e, idp, adm, cfg := startSSO(t)
	adm.user("alice@example.com", "viewer", "alice-password")

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
	e, idp, adm, cfg := startSSO(t)
	adm.user("alice@example.com", "viewer", "alice-password")

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

// TestSSOSignInsInOneBrowser: each start set a new binding cookie, and
// every callback cleared it. Two sign-ins started in one browser (two
// tabs, a double click on the button) then both failed as invalid_state:
// the first's callback met the second's binding and cleared it, the
// second's met none. And any page could abort a browser's sign-in in
// progress by navigating it to the callback with a made-up state (a
// top-level GET carries the SameSite=Lax cookie), which cleared the
// binding. A browser keeps its binding for the pending sign-ins it starts
// (each state is still single-use and bound to it); the callback leaves
// it to expire.
func TestSSOSignInsInOneBrowser(t *testing.T) {
	e, _, adm, _ := startSSO(t)
	adm.user("alice@example.com", "viewer", "alice-password")

	// begin runs start and the provider's approval in b: the callback URL.
	begin := func(b *client) string {
		st := b.want(303, "GET", "/api/v1/auth/sso/start", nil)
		return b.want(302, "GET", st.Header.Get("Location"), nil).Header.Get("Location")
	}
	signedIn := func(a answer) {
		t.Helper()
		if loc := a.Header.Get("Location"); loc != "/" {
			t.Fatalf("callback redirects to %q", loc)
		}
	}

	b := e.browser()
	first, second := begin(b), begin(b)
	signedIn(b.want(303, "GET", first, nil))
	signedIn(b.want(303, "GET", second, nil))
	b.want(200, "GET", "/api/v1/auth/me", nil)
	// Each state is still single-use, and still bound to the browser.
	wantSSOError(t, b.want(303, "GET", first, nil), "invalid_state")
	third := begin(b)
	wantSSOError(t, e.browser().want(303, "GET", third, nil), "invalid_state")

	// A made-up callback does not abort the sign-in under way.
	b = e.browser()
	pending := begin(b)
	wantSSOError(t, b.want(303, "GET", "/api/v1/auth/sso/callback?code=x&state=made-up", nil), "invalid_state")
	wantSSOError(t, b.want(303, "GET", "/api/v1/auth/sso/callback?error=access_denied", nil), "access_denied")
	signedIn(b.want(303, "GET", pending, nil))

	// A malformed binding cookie is replaced, not adopted.
	a := e.anon().want(303, "GET", "/api/v1/auth/sso/start", nil, "Cookie", "gateway_sso=short")
	if ck := setCookieOf(a, "gateway_sso"); ck == nil || len(ck.Value) != 43 {
		t.Fatalf("binding cookie set for a malformed one: %+v", ck)
	}
}

// TestSSOProvisionedUserIsValid: an account provisioned at a first SSO
// sign-in took the provider's name and email claims as they came, which
// the users' own endpoints would refuse (a name of more than 255
// characters or with control characters, an email of more than 254): the
// account's answer, sent back as it is (the user endpoints accept their
// answers), was 400, and the dashboard showed what the provider's user
// typed. The name is cleaned (control characters dropped, spaces trimmed,
// 255 characters at most); an over-long email is refused (email_missing:
// no valid email).
func TestSSOProvisionedUserIsValid(t *testing.T) {
	e := start(t)
	idp := newIDP(t)
	adm := e.withToken(e.anon().token())
	adm.want(200, "PUT", "/api/v1/sso/config", map[string]any{"issuer": idp.Issuer(), "client_id": idp.ClientID,
		"client_secret": idp.ClientSecret, "auto_provision_role": "viewer"})

	idp.User = idpUser{Email: strings.Repeat("l", 250) + "@example.org", EmailVerified: true, Name: "Long"}
	wantSSOError(t, ssoFlow(t, e.browser(), idp, nil), "email_missing")

	idp.User = idpUser{Email: "frank@example.org", EmailVerified: true, Name: "  Frank\x00\x1b[31m\n" + strings.Repeat("é", 300)}
	if a := ssoFlow(t, e.browser(), idp, nil); a.Header.Get("Location") != "/" {
		t.Fatalf("provisioning: %q", a.Header.Get("Location"))
	}
	u := userByEmail(t, adm, "frank@example.org")
	name, _ := u["name"].(string)
	if want := "Frank[31m" + strings.Repeat("é", 246); name != want {
		t.Fatalf("provisioned name %q, want %q", name, want)
	}
	// The answer goes back as it is.
	adm.want(200, "PUT", "/api/v1/users/"+itoa(u["id"]), u)

	// A name of only spaces and control characters is no name.
	idp.User = idpUser{Email: "grace@example.org", EmailVerified: true, Name: " \t\x01 "}
	if a := ssoFlow(t, e.browser(), idp, nil); a.Header.Get("Location") != "/" {
		t.Fatalf("provisioning: %q", a.Header.Get("Location"))
	}
	g := userByEmail(t, adm, "grace@example.org")
	if g["name"] != "" {
		t.Fatalf("provisioned name %q", g["name"])
	}
	adm.want(200, "PUT", "/api/v1/users/"+itoa(g["id"]), g)
}

// TestSSODiscoveryFollowsStoredConfig: a node caches the provider's
// discovery for an hour and forgot it only when its own API stored the
// SSO configuration. In a cluster the administrator fixing the provider
// through another node (same issuer, endpoints moved) left this node
// sending sign-ins to the old endpoints until the hour ran out. The cache
// now keys on the stored configuration's version: a change written by
// anyone (here a second handle on the store, as another node's PUT
// writes it) is discovered again at the next sign-in.
func TestSSODiscoveryFollowsStoredConfig(t *testing.T) {
	e, idp, _, _ := startSSO(t)
	asked := func() int {
		idp.mu.Lock()
		defer idp.mu.Unlock()
		return idp.Discoveries
	}
	authorizeURL := func() string {
		st := e.anon().want(303, "GET", "/api/v1/auth/sso/start", nil)
		u, err := url.Parse(st.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		u.RawQuery = ""
		return u.String()
	}
	if got := authorizeURL(); got != idp.Issuer()+"/authorize" {
		t.Fatalf("start redirects to %s", got)
	}
	first := asked()
	authorizeURL()
	if n := asked(); n != first {
		t.Fatalf("a second start discovered again (%d discoveries, then %d): the cache does not hold", first, n)
	}

	// The provider moves its authorization endpoint; another node stores
	// the configuration (its label, say) and forgets its own cache.
	idp.mu.Lock()
	idp.Discovery = map[string]any{"authorization_endpoint": idp.Issuer() + "/v2/authorize"}
	idp.mu.Unlock()
	db := e.db().DB
	if err := db.Model(&storage.SSOConfig{}).Where("id = ?", 1).
		Updates(map[string]any{"label": "Company SSO", "updated_at": time.Now().Add(time.Second)}).Error; err != nil {
		t.Fatal(err)
	}
	if got := authorizeURL(); got != idp.Issuer()+"/v2/authorize" {
		t.Fatalf("after another node stored the configuration, start redirects to %s (%d discoveries): the cached discovery outlived it", got, asked())
	}
}
