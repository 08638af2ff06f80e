package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/caddy-gateway/gateway/internal/guard"
)

// The openid-connect plugin's process-wide provider state: discovery, the
// key set and the introspection cache of an issuer, shared by every
// plugin instance naming it and kept across config reloads (a usage pool
// keyed by issuer, as Caddy's reverse_proxy keeps its hosts), so that a
// reload costs the provider no request.
var providers = caddy.NewUsagePool()

// Provider limits, variables so that tests can shorten them.
var (
	// discoveryTTL is how long a discovery document is used before it
	// is fetched again (its key set is refetched with it).
	discoveryTTL = time.Hour
	// providerRetry is the least time between two fetches (discovery or
	// key set) after one failed: requests meanwhile fail at once instead
	// of each waiting for an unreachable provider.
	providerRetry = 5 * time.Second
	// jwksRefetchInterval is the least time between two key set fetches
	// caused by tokens naming an unknown key id: a flood of tokens with
	// forged kids costs the provider one request per interval.
	jwksRefetchInterval = 30 * time.Second
	// oidcHTTPTimeout bounds each request to the provider.
	oidcHTTPTimeout = 10 * time.Second
)

const (
	// oidcMaxAnswer bounds the provider's answers (discovery, key set,
	// token and introspection answers).
	oidcMaxAnswer = 1 << 20
	// maxTokenLen bounds a token the plugin looks at: longer ones are
	// refused before any parsing.
	maxTokenLen = 16 << 10
	// oidcLeeway is the clock skew allowed on exp, nbf and iat.
	oidcLeeway = 60 * time.Second
	// introspectionCacheSize bounds the introspection cache (entries).
	introspectionCacheSize = 10000
	// introspectionNegativeTTL is how long an inactive token's answer is
	// remembered.
	introspectionNegativeTTL = 10 * time.Second
	// introspectionMaxTTL bounds how long an active token's answer is
	// remembered (its exp, if sooner, ends it).
	introspectionMaxTTL = 5 * time.Minute
	// introspectionSlots bounds the introspection requests under way per
	// provider.
	introspectionSlots = 32
)

// asymmetricAlgs are the signature algorithms a token may use: never
// none, never HMAC (verified with the provider's public key as a secret,
// anyone could sign).
var asymmetricAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

var (
	errProviderUnavailable = errors.New("the identity provider is unavailable")
	errInvalidToken        = errors.New("invalid token")
)

// provider is one issuer's state.
type provider struct {
	issuer string
	client *http.Client

	mu       sync.Mutex
	disc     *discovered
	discAt   time.Time // when disc was fetched
	discFail time.Time // the last failed discovery
	discBusy chan struct{}

	keys     []jose.JSONWebKey
	keysAt   time.Time // the last key set fetch (failed or not)
	keysBusy chan struct{}
	keysGen  int // counts key set fetches (tests)

	intro      map[[32]byte]introspected
	introSlots chan struct{}
}

// discovered is what the plugin uses of a discovery document.
type discovered struct {
	provider      *oidc.Provider
	JWKSURI       string   `json:"jwks_uri"`
	Introspection string   `json:"introspection_endpoint"`
	EndSession    string   `json:"end_session_endpoint"`
	Algs          []string `json:"id_token_signing_alg_values_supported"`
	algs          []jose.SignatureAlgorithm
}

// introspected is a cached introspection answer.
type introspected struct {
	claims map[string]any // nil: inactive
	until  time.Time
}

// Destruct implements caddy.Destructor: the last instance naming the
// issuer is gone.
func (p *provider) Destruct() error {
	p.client.CloseIdleConnections()
	return nil
}

// holdProvider counts an instance holding issuer's state.
func holdProvider(issuer string) (*provider, error) {
	v, _, err := providers.LoadOrNew(issuer, func() (caddy.Destructor, error) {
		return &provider{
			issuer:     issuer,
			client:     newProviderClient(),
			intro:      map[[32]byte]introspected{},
			introSlots: make(chan struct{}, introspectionSlots),
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*provider), nil
}

// newProviderClient is the HTTP client of everything sent to a provider.
// The URLs it fetches are the provider's (its discovery names the key
// set, token and introspection endpoints), so it dials through package
// guard, like every outbound client of the gateway: no provider gets the
// gateway to send a request to its admin API, Caddy's admin endpoint or
// its own proxy, whatever its names resolve to or redirect to. Answers
// are bounded (oidcMaxAnswer).
func newProviderClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = guard.Dialer(&net.Dialer{Timeout: oidcHTTPTimeout, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Timeout: oidcHTTPTimeout, Transport: boundedTransport{tr}}
}

// boundedTransport makes every answer's body fail past oidcMaxAnswer
// bytes.
type boundedTransport struct{ rt http.RoundTripper }

func (b boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, oidcMaxAnswer), resp.Body}
	return resp, nil
}

// discovery returns the provider's discovery, fetching it when there is
// none or it is older than discoveryTTL (an older one keeps being used
// while the provider cannot be reached).
func (p *provider) discovery(ctx context.Context) (*discovered, error) {
	p.mu.Lock()
	fresh := p.disc != nil && time.Since(p.discAt) < discoveryTTL
	if fresh || (p.disc != nil && p.discBusy != nil) {
		d := p.disc
		p.mu.Unlock()
		return d, nil
	}
	if p.discBusy == nil {
		if p.disc == nil && time.Since(p.discFail) < providerRetry {
			p.mu.Unlock()
			return nil, errProviderUnavailable
		}
		p.discBusy = make(chan struct{})
		go p.discover(p.discBusy)
	}
	busy := p.discBusy
	p.mu.Unlock()
	select {
	case <-busy:
	case <-ctx.Done():
		return nil, errProviderUnavailable
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.disc == nil {
		return nil, errProviderUnavailable
	}
	return p.disc, nil
}

// discover fetches the discovery document (go-oidc checks that its issuer
// is the configured one) and, with it, the key set.
func (p *provider) discover(done chan struct{}) {
	ctx, cancel := context.WithTimeout(oidc.ClientContext(context.Background(), p.client), oidcHTTPTimeout)
	defer cancel()
	d, err := p.fetchDiscovery(ctx)
	var keys []jose.JSONWebKey
	if err == nil {
		keys, err = p.fetchKeys(ctx, d.JWKSURI)
	}
	p.mu.Lock()
	if err == nil {
		p.disc, p.discAt = d, time.Now()
		p.keys, p.keysAt = keys, time.Now()
		p.keysGen++
	} else {
		p.discFail = time.Now()
		if p.disc != nil {
			p.discAt = time.Now().Add(providerRetry - discoveryTTL) // keep the old one; retry later
		}
	}
	p.discBusy = nil
	p.mu.Unlock()
	close(done)
}

func (p *provider) fetchDiscovery(ctx context.Context) (*discovered, error) {
	op, err := oidc.NewProvider(ctx, p.issuer)
	if err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", p.issuer, err)
	}
	d := &discovered{provider: op}
	if err := op.Claims(d); err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", p.issuer, err)
	}
	for _, field := range []struct{ name, v string }{
		{"jwks_uri", d.JWKSURI}, {"introspection_endpoint", d.Introspection},
		{"end_session_endpoint", d.EndSession}, {"token_endpoint", op.Endpoint().TokenURL},
		{"authorization_endpoint", op.Endpoint().AuthURL},
	} {
		if field.v == "" && field.name != "jwks_uri" {
			continue
		}
		if u, err := url.Parse(field.v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("discovery of %s: %s is not an http(s) URL", p.issuer, field.name)
		}
	}
	for _, a := range d.Algs {
		if alg := jose.SignatureAlgorithm(a); slices.Contains(asymmetricAlgs, alg) {
			d.algs = append(d.algs, alg)
		}
	}
	if len(d.algs) == 0 {
		// OpenID Connect Discovery requires RS256 support.
		d.algs = []jose.SignatureAlgorithm{jose.RS256}
	}
	return d, nil
}

// fetchKeys fetches the key set, keeping only public signature keys.
func (p *provider) fetchKeys(ctx context.Context, uri string) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("key set of %s: %w", p.issuer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("key set of %s: status %d", p.issuer, resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return nil, fmt.Errorf("key set of %s: %w", p.issuer, err)
	}
	var keys []jose.JSONWebKey
	for _, k := range set.Keys {
		if k.Use == "enc" || !k.Valid() || !k.IsPublic() {
			continue
		}
		if _, symmetric := k.Key.([]byte); symmetric {
			continue
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// keysFor returns the keys that may verify a token of key id kid: those
// of that id (every key when the token names none). An unknown kid
// refetches the key set, at most once per jwksRefetchInterval.
func (p *provider) keysFor(ctx context.Context, d *discovered, kid string) []jose.JSONWebKey {
	for range 2 {
		p.mu.Lock()
		var out []jose.JSONWebKey
		for _, k := range p.keys {
			if kid == "" || k.KeyID == kid {
				out = append(out, k)
			}
		}
		if len(out) > 0 || kid == "" {
			p.mu.Unlock()
			return out
		}
		if p.keysBusy == nil {
			if time.Since(p.keysAt) < jwksRefetchInterval {
				p.mu.Unlock()
				return nil
			}
			p.keysBusy = make(chan struct{})
			p.keysAt = time.Now()
			go p.refetchKeys(d.JWKSURI, p.keysBusy)
		}
		busy := p.keysBusy
		p.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

func (p *provider) refetchKeys(uri string, done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), oidcHTTPTimeout)
	defer cancel()
	keys, err := p.fetchKeys(ctx, uri)
	p.mu.Lock()
	if err == nil {
		p.keys = keys
	}
	p.keysAt = time.Now()
	p.keysGen++
	p.keysBusy = nil
	p.mu.Unlock()
	close(done)
}

// keyFetches counts the key set fetches so far (tests).
func (p *provider) keyFetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keysGen
}

// verifyJWT verifies a signed token against the provider's keys and its
// claims: iss, aud (one of audiences), exp (required), nbf and iat, with
// oidcLeeway. It returns the token's claims.
func (p *provider) verifyJWT(ctx context.Context, raw string, audiences []string, now time.Time) (map[string]any, error) {
	d, err := p.discovery(ctx)
	if err != nil {
		return nil, err
	}
	jws, err := jose.ParseSigned(raw, d.algs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("%w: not a token signed with one of the provider's algorithms", errInvalidToken)
	}
	hdr := jws.Signatures[0].Header
	var payload []byte
	for _, k := range p.keysFor(ctx, d, hdr.KeyID) {
		if k.Algorithm != "" && k.Algorithm != hdr.Algorithm {
			continue
		}
		if b, err := jws.Verify(k); err == nil {
			payload = b
			break
		}
	}
	if payload == nil {
		return nil, fmt.Errorf("%w: signature not verified by the provider's keys", errInvalidToken)
	}
	claims, err := decodeClaims(payload)
	if err != nil {
		return nil, err
	}
	if iss, _ := claims["iss"].(string); iss != p.issuer {
		return nil, fmt.Errorf("%w: issuer mismatch", errInvalidToken)
	}
	if !audienceMatches(claims["aud"], audiences) {
		return nil, fmt.Errorf("%w: audience mismatch", errInvalidToken)
	}
	if err := checkTimes(claims, now, true); err != nil {
		return nil, err
	}
	return claims, nil
}

// decodeClaims decodes a token's payload (a JSON object).
func decodeClaims(payload []byte) (map[string]any, error) {
	var claims map[string]any
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil || claims == nil {
		return nil, fmt.Errorf("%w: claims are not a JSON object", errInvalidToken)
	}
	return claims, nil
}

// audienceMatches reports whether aud (a string or an array of strings)
// holds one of want.
func audienceMatches(aud any, want []string) bool {
	switch v := aud.(type) {
	case string:
		return slices.Contains(want, v)
	case []any:
		for _, a := range v {
			if s, ok := a.(string); ok && slices.Contains(want, s) {
				return true
			}
		}
	}
	return false
}

// numericClaim reads a NumericDate claim: ok is false when it is present
// but not a number.
func numericClaim(claims map[string]any, name string) (t time.Time, present, ok bool) {
	v, present := claims[name]
	if !present {
		return time.Time{}, false, true
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return time.Time{}, true, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, true, false
	}
	return time.Unix(int64(f), 0), true, true
}

// checkTimes checks exp (required when expRequired), nbf and iat with
// oidcLeeway.
func checkTimes(claims map[string]any, now time.Time, expRequired bool) error {
	exp, present, ok := numericClaim(claims, "exp")
	if !ok || (expRequired && !present) {
		return fmt.Errorf("%w: exp missing or not a number", errInvalidToken)
	}
	if present && !now.Before(exp.Add(oidcLeeway)) {
		return fmt.Errorf("%w: token expired", errInvalidToken)
	}
	nbf, present, ok := numericClaim(claims, "nbf")
	if !ok || (present && now.Add(oidcLeeway).Before(nbf)) {
		return fmt.Errorf("%w: token not valid yet", errInvalidToken)
	}
	iat, present, ok := numericClaim(claims, "iat")
	if !ok || (present && now.Add(oidcLeeway).Before(iat)) {
		return fmt.Errorf("%w: token issued in the future", errInvalidToken)
	}
	return nil
}

// introspect asks the provider's introspection endpoint (RFC 7662) about
// an opaque token, authenticating as the client. Answers are cached: an
// active token's until its exp (at most introspectionMaxTTL), an
// inactive one's for introspectionNegativeTTL.
func (p *provider) introspect(ctx context.Context, raw, clientID, clientSecret string, audiences []string, now time.Time) (map[string]any, error) {
	d, err := p.discovery(ctx)
	if err != nil {
		return nil, err
	}
	if d.Introspection == "" {
		return nil, fmt.Errorf("%w: the provider has no introspection endpoint", errInvalidToken)
	}
	key := sha256.Sum256([]byte(clientID + "\x00" + raw))
	p.mu.Lock()
	e, ok := p.intro[key]
	p.mu.Unlock()
	if ok && now.Before(e.until) {
		if e.claims == nil {
			return nil, fmt.Errorf("%w: token not active", errInvalidToken)
		}
		return e.claims, nil
	}
	select {
	case p.introSlots <- struct{}{}:
		defer func() { <-p.introSlots }()
	case <-ctx.Done():
		return nil, errProviderUnavailable
	}
	claims, err := p.postIntrospection(ctx, d.Introspection, raw, clientID, clientSecret)
	if err != nil {
		return nil, err
	}
	until := now.Add(introspectionNegativeTTL)
	if claims != nil {
		if iss, ok := claims["iss"].(string); ok && iss != p.issuer {
			claims = nil
		} else if aud, ok := claims["aud"]; ok && !audienceMatches(aud, audiences) {
			claims = nil
		} else if checkTimes(claims, now, false) != nil {
			claims = nil
		} else {
			until = now.Add(introspectionMaxTTL)
			if exp, present, _ := numericClaim(claims, "exp"); present && exp.Before(until) {
				until = exp
			}
		}
	}
	p.mu.Lock()
	if len(p.intro) >= introspectionCacheSize {
		for k, v := range p.intro {
			if !now.Before(v.until) || len(p.intro) >= introspectionCacheSize {
				delete(p.intro, k)
			}
		}
	}
	p.intro[key] = introspected{claims: claims, until: until}
	p.mu.Unlock()
	if claims == nil {
		return nil, fmt.Errorf("%w: token not active", errInvalidToken)
	}
	return claims, nil
}

func (p *provider) postIntrospection(ctx context.Context, endpoint, raw, clientID, clientSecret string) (map[string]any, error) {
	form := url.Values{"token": {raw}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, errProviderUnavailable
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(clientSecret))
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, errProviderUnavailable
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errProviderUnavailable
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, errProviderUnavailable
	}
	claims, err := decodeClaims(b)
	if err != nil {
		return nil, errProviderUnavailable
	}
	if active, _ := claims["active"].(bool); !active {
		return nil, nil
	}
	return claims, nil
}
