// Package cloudflare is a Caddy DNS provider module (dns.providers.cloudflare)
// for ACME DNS-01 challenges through Cloudflare's REST API (v4): it finds
// the zone by name and creates and deletes TXT records. It implements libdns
// RecordAppender and RecordDeleter (what certmagic needs).
//
// Its test is app/tests/acmedns (TestDNS01WildcardThroughCloudflare):
// a wildcard certificate obtained from a test CA through this provider,
// pointed at a fake of the Cloudflare API on 127.0.0.1.
package cloudflare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/libdns/libdns"

	"github.com/caddy-gateway/gateway/internal/configref"
)

// DefaultBaseURL is Cloudflare's API.
const DefaultBaseURL = "https://api.cloudflare.com/client/v4"

func init() {
	caddy.RegisterModule(new(Provider))
}

// Provider manages TXT records through the Cloudflare API.
type Provider struct {
	// APIToken is a Cloudflare API token with Zone:Read and DNS:Edit.
	// Placeholders ({env.CF_API_TOKEN}) are replaced.
	APIToken string `json:"api_token,omitempty"`
	// APITokenRef references the token (a string in package configref)
	// instead: the gateway never writes the token into Caddy's config.
	APITokenRef string `json:"api_token_ref,omitempty"`
	// BaseURL of the API; default DefaultBaseURL.
	BaseURL string `json:"base_url,omitempty"`

	client *http.Client
	mu     sync.Mutex
	zones  map[string]string // zone name → id
}

// CaddyModule returns the Caddy module information.
func (*Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "dns.providers.cloudflare", New: func() caddy.Module { return new(Provider) }}
}

// Provision implements caddy.Provisioner.
func (p *Provider) Provision(caddy.Context) error {
	if p.APITokenRef != "" {
		token, err := configref.Get[string](p.APITokenRef)
		if err != nil {
			return fmt.Errorf("cloudflare: api_token_ref: %w", err)
		}
		p.APIToken = token
	} else {
		p.APIToken = caddy.NewReplacer().ReplaceAll(p.APIToken, "")
	}
	if p.APIToken == "" {
		return errors.New("cloudflare: api_token is required")
	}
	return nil
}

func (p *Provider) base() string {
	if p.BaseURL == "" {
		return DefaultBaseURL
	}
	return strings.TrimSuffix(p.BaseURL, "/")
}

func (p *Provider) httpClient() *http.Client {
	if p.client == nil {
		p.client = &http.Client{Timeout: 30 * time.Second}
	}
	return p.client
}

type apiResponse struct {
	Success bool            `json:"success"`
	Errors  []apiError      `json:"errors"`
	Result  json.RawMessage `json:"result"`
}

type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type dnsRecord struct {
	ID      string `json:"id,omitempty"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	Content string `json:"content"`
	TTL     int    `json:"ttl"`
}

// do calls the API; the token is sent as a bearer token and never appears
// in errors.
func (p *Provider) do(ctx context.Context, method, path string, query url.Values, body, result any) error {
	u := p.base() + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.APIToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("cloudflare %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 10<<20))
	if err != nil {
		return fmt.Errorf("cloudflare %s %s: reading answer: %w", method, path, err)
	}
	var ar apiResponse
	if err := json.Unmarshal(raw, &ar); err != nil {
		return fmt.Errorf("cloudflare %s %s: status %d, answer is not JSON", method, path, resp.StatusCode)
	}
	if !ar.Success || resp.StatusCode >= 300 {
		msgs := make([]string, 0, len(ar.Errors))
		for _, e := range ar.Errors {
			msgs = append(msgs, fmt.Sprintf("%d: %s", e.Code, e.Message))
		}
		return fmt.Errorf("cloudflare %s %s: status %d: %s", method, path, resp.StatusCode, strings.Join(msgs, "; "))
	}
	if result != nil && len(ar.Result) > 0 {
		if err := json.Unmarshal(ar.Result, result); err != nil {
			return fmt.Errorf("cloudflare %s %s: decoding result: %w", method, path, err)
		}
	}
	return nil
}

// zoneID finds the zone's id by name (cached).
func (p *Provider) zoneID(ctx context.Context, zone string) (string, error) {
	name := strings.TrimSuffix(zone, ".")
	p.mu.Lock()
	id, ok := p.zones[name]
	p.mu.Unlock()
	if ok {
		return id, nil
	}
	var zones []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if err := p.do(ctx, http.MethodGet, "/zones", url.Values{"name": {name}}, nil, &zones); err != nil {
		return "", err
	}
	for _, z := range zones {
		if strings.EqualFold(z.Name, name) {
			p.mu.Lock()
			if p.zones == nil {
				p.zones = map[string]string{}
			}
			p.zones[name] = z.ID
			p.mu.Unlock()
			return z.ID, nil
		}
	}
	return "", fmt.Errorf("cloudflare: zone %q not found (does the token have Zone:Read on it?)", name)
}

func fqdn(name, zone string) string {
	return strings.TrimSuffix(libdns.AbsoluteName(name, zone), ".")
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

func toLibdns(r dnsRecord, zone string) libdns.Record {
	ttl := time.Duration(r.TTL) * time.Second
	name := libdns.RelativeName(r.Name+".", zone)
	if r.Type == "TXT" {
		return libdns.TXT{Name: name, TTL: ttl, Text: unquote(r.Content)}
	}
	return libdns.RR{Name: name, TTL: ttl, Type: r.Type, Data: r.Content}
}

// AppendRecords implements libdns.RecordAppender.
func (p *Provider) AppendRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	id, err := p.zoneID(ctx, zone)
	if err != nil {
		return nil, err
	}
	out := make([]libdns.Record, 0, len(recs))
	for _, rec := range recs {
		rr := rec.RR()
		ttl := int(rr.TTL / time.Second)
		if ttl < 60 {
			ttl = 1 // Cloudflare's "automatic"
		}
		in := dnsRecord{Type: rr.Type, Name: fqdn(rr.Name, zone), Content: rr.Data, TTL: ttl}
		var created dnsRecord
		if err := p.do(ctx, http.MethodPost, "/zones/"+url.PathEscape(id)+"/dns_records", nil, in, &created); err != nil {
			return out, err
		}
		if created.Name == "" {
			created = in
		}
		out = append(out, toLibdns(created, zone))
	}
	return out, nil
}

// DeleteRecords implements libdns.RecordDeleter: records matching by type,
// name and (when given) value are deleted.
func (p *Provider) DeleteRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	id, err := p.zoneID(ctx, zone)
	if err != nil {
		return nil, err
	}
	var out []libdns.Record
	for _, rec := range recs {
		rr := rec.RR()
		q := url.Values{"name": {fqdn(rr.Name, zone)}}
		if rr.Type != "" {
			q.Set("type", rr.Type)
		}
		var found []dnsRecord
		if err := p.do(ctx, http.MethodGet, "/zones/"+url.PathEscape(id)+"/dns_records", q, nil, &found); err != nil {
			return out, err
		}
		for _, r := range found {
			if rr.Data != "" && unquote(r.Content) != rr.Data {
				continue
			}
			if err := p.do(ctx, http.MethodDelete, "/zones/"+url.PathEscape(id)+"/dns_records/"+url.PathEscape(r.ID), nil, nil, nil); err != nil {
				return out, err
			}
			out = append(out, toLibdns(r, zone))
		}
	}
	return out, nil
}

// Interface guards.
var (
	_ caddy.Provisioner     = (*Provider)(nil)
	_ libdns.RecordAppender = (*Provider)(nil)
	_ libdns.RecordDeleter  = (*Provider)(nil)
)
