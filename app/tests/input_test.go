package tests

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// hostile is one refused input: the request, and the field its 400 must
// name (the error starts with it).
type hostile struct {
	method, path string
	body         any
	field        string
}

func wantRefused(t *testing.T, g *testgw.Gateway, c hostile) {
	t.Helper()
	st, b := g.Do(c.method, c.path, c.body)
	var e struct{ Error string }
	_ = json.Unmarshal(b, &e)
	if st != http.StatusBadRequest || !strings.HasPrefix(e.Error, c.field+": ") {
		t.Errorf("%s %s %.200v: status %d %s, want 400 naming %q", c.method, c.path, c.body, st, b, c.field)
	}
}

// listing returns the JSON of a list endpoint, to compare before and after.
func listing(t *testing.T, g *testgw.Gateway, paths ...string) string {
	t.Helper()
	var all []string
	for _, p := range paths {
		st, b := g.Do("GET", p, nil)
		if st != 200 {
			t.Fatalf("GET %s: %d %s", p, st, b)
		}
		all = append(all, string(b))
	}
	return strings.Join(all, "\n")
}

// Control characters, blank names, spaces in hosts, oversized strings and
// arrays, out-of-range numbers and wrong types are refused with 400 naming
// the exact field, in every resource, and nothing is stored.
func TestHostileInputRefused(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s")
	rid := g.Route("r", sid, testgw.Paths("/r"))
	cid := testgw.ID(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "c"}))
	svc := func(f map[string]any) map[string]any {
		b := map[string]any{"name": "x"}
		for k, v := range f {
			b[k] = v
		}
		return b
	}
	route := func(f map[string]any) map[string]any {
		b := map[string]any{"name": "x", "service_id": sid}
		for k, v := range f {
			b[k] = v
		}
		return b
	}
	plugin := func(typ string, cfg map[string]any) map[string]any {
		return map[string]any{"type": typ, "scope": "route", "route_id": rid, "config": cfg}
	}
	big := func(n int) string { return strings.Repeat("a", n) }
	many := func(n int, v string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", v, i)
		}
		return out
	}
	const maxInt64 = int64(1<<63 - 1)
	cases := []hostile{
		// services
		{"POST", "/api/v1/services", svc(map[string]any{"name": "a\r\nb"}), "name"},
		{"POST", "/api/v1/services", svc(map[string]any{"name": "   "}), "name"},
		{"POST", "/api/v1/services", svc(map[string]any{"name": "a\x00"}), "name"},
		{"POST", "/api/v1/services", svc(map[string]any{"name": "a\x7f"}), "name"},
		{"POST", "/api/v1/services", svc(map[string]any{"name": big(256)}), "name"},
		{"POST", "/api/v1/services", svc(map[string]any{"tls_sni": "a b"}), "tls_sni"},
		{"POST", "/api/v1/services", svc(map[string]any{"tls_sni": "a\r\nb"}), "tls_sni"},
		{"POST", "/api/v1/services", svc(map[string]any{"tls_sni": big(20 << 10)}), "tls_sni"},
		{"POST", "/api/v1/services", svc(map[string]any{"health_path": "/h\r\nX: y"}), "health_path"},
		{"POST", "/api/v1/services", svc(map[string]any{"health_path": "/" + big(4096)}), "health_path"},
		{"POST", "/api/v1/services", svc(map[string]any{"health_path": "/a b"}), "health_path"},
		{"POST", "/api/v1/services", svc(map[string]any{"connect_timeout_ms": maxInt64}), "connect_timeout_ms"},
		{"POST", "/api/v1/services", svc(map[string]any{"read_timeout_ms": 3600001}), "read_timeout_ms"},
		{"POST", "/api/v1/services", svc(map[string]any{"write_timeout_ms": -1}), "write_timeout_ms"},
		{"POST", "/api/v1/services", svc(map[string]any{"retries": 101}), "retries"},
		{"POST", "/api/v1/services", svc(map[string]any{"retries": 1 << 40}), "retries"},
		{"POST", "/api/v1/services", `{"name":"x","connect_timeout_ms":9223372036854775808}`, "connect_timeout_ms"},
		{"POST", "/api/v1/services", `{"name":"x","connect_timeout_ms":1.5}`, "connect_timeout_ms"},
		{"POST", "/api/v1/services", `{"name":"x","connect_timeout_ms":"1000"}`, "connect_timeout_ms"},
		{"PUT", "/api/v1/services/" + itoa(sid), svc(map[string]any{"name": "a\nb"}), "name"},
		// targets
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "a b", "port": 80}, "host"},
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "a\r\nb", "port": 80}, "host"},
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": big(254), "port": 80}, "host"},
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "[::1]", "port": 80}, "host"},
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "x]", "port": 80}, "host"},
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "h:81", "port": 80}, "host"},
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "h", "port": 65536}, "port"},
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "h", "port": 80, "weight": 65536}, "weight"},
		// hosts some resolvers read as IPv4 addresses and Go's does not
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "127.1", "port": 80}, "host"},
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "2130706433", "port": 80}, "host"},
		{"POST", "/api/v1/services/" + itoa(sid) + "/targets", map[string]any{"host": "0x7f000001", "port": 80}, "host"},
		// routes
		{"POST", "/api/v1/routes", route(map[string]any{"name": "\t"}), "name"},
		{"POST", "/api/v1/routes", route(map[string]any{"hosts": []string{"ok.example", "a b.example"}}), "hosts[1]"},
		{"POST", "/api/v1/routes", route(map[string]any{"hosts": []string{"a\r\n.example"}}), "hosts[0]"},
		{"POST", "/api/v1/routes", route(map[string]any{"hosts": many(101, "h")}), "hosts"},
		{"POST", "/api/v1/routes", route(testgw.Paths("/a\nb")), "paths[0]"},
		{"POST", "/api/v1/routes", route(map[string]any{"paths": []string{"/" + big(4096)}}), "paths[0]"},
		{"POST", "/api/v1/routes", route(map[string]any{"paths": many(101, "/p")}), "paths"},
		{"POST", "/api/v1/routes", route(map[string]any{"methods": many(33, "M")}), "methods"},
		{"POST", "/api/v1/routes", route(map[string]any{"headers": map[string]string{"X-A": "v\r\nX-B: 1"}}), "headers.X-A"},
		{"POST", "/api/v1/routes", route(map[string]any{"headers": map[string]string{"X-A": big(8193)}}), "headers.X-A"},
		{"POST", "/api/v1/routes", route(map[string]any{"headers": map[string]string{"X A": "v"}}), "headers.X A"},
		{"POST", "/api/v1/routes", route(map[string]any{"priority": 1 << 31}), "priority"},
		{"POST", "/api/v1/routes", route(map[string]any{"splits": []map[string]any{{"service_id": sid, "weight": 65536}}}), "splits[0].weight"},
		{"POST", "/api/v1/routes", route(map[string]any{"splits": []any{map[string]any{"service_id": sid, "weight": "1"}}}), "splits[0].weight"},
		// stream routes
		{"POST", "/api/v1/stream-routes", map[string]any{"name": "a\nb", "listen_addr": "127.0.0.1:1", "service_id": sid}, "name"},
		{"POST", "/api/v1/stream-routes", map[string]any{"name": "x", "listen_addr": "127.0.0.1:1\r\n", "service_id": sid}, "listen_addr"},
		// plugins (config fields that become headers, names or numbers)
		{"POST", "/api/v1/plugins", plugin("request-transform", map[string]any{"set_headers": map[string]string{"X-A": "a\r\nX-Evil: 1"}}), "config.set_headers.X-A"},
		{"POST", "/api/v1/plugins", plugin("request-transform", map[string]any{"add_headers": map[string]string{"X\r\nY": "v"}}), "config.add_headers.X\r\nY"},
		{"POST", "/api/v1/plugins", plugin("request-transform", map[string]any{"set_query": map[string]string{"q": "a\nb"}}), "config.set_query.q"},
		{"POST", "/api/v1/plugins", plugin("response-transform", map[string]any{"set_headers": map[string]string{"X-A": big(8193)}}), "config.set_headers.X-A"},
		{"POST", "/api/v1/plugins", plugin("response-transform", map[string]any{"remove_headers": many(101, "X-")}), "config.remove_headers"},
		{"POST", "/api/v1/plugins", plugin("http-log", map[string]any{"endpoint": "http://127.0.0.1:9/", "headers": map[string]string{"Authorization": "a\nb"}}), "config.headers.Authorization"},
		{"POST", "/api/v1/plugins", plugin("redirect", map[string]any{"location": "https://x.example/\r\nSet-Cookie: a=b"}), "config.location"},
		{"POST", "/api/v1/plugins", plugin("redirect", map[string]any{"location": "http://:80/"}), "config.location"},
		{"POST", "/api/v1/plugins", plugin("http-log", map[string]any{"endpoint": "http://:9/x"}), "config.endpoint"},
		{"POST", "/api/v1/plugins", plugin("http-log", map[string]any{"endpoint": "http://127.0.0.1:99999/"}), "config.endpoint"},
		{"POST", "/api/v1/plugins", plugin("request-termination", map[string]any{"message": "a\nb"}), "config.message"},
		{"POST", "/api/v1/plugins", plugin("request-termination", map[string]any{"content_type": "text/html\r\nX: y"}), "config.content_type"},
		{"POST", "/api/v1/plugins", plugin("request-termination", map[string]any{"body": "a\x00"}), "config.body"},
		{"POST", "/api/v1/plugins", plugin("request-id", map[string]any{"header_name": "X Id"}), "config.header_name"},
		{"POST", "/api/v1/plugins", plugin("rate-limit", map[string]any{"limit": 1, "key": "header", "header_name": "X\r\n"}), "config.header_name"},
		{"POST", "/api/v1/plugins", plugin("rate-limit", map[string]any{"limit": maxInt64}), "config.limit"},
		{"POST", "/api/v1/plugins", plugin("rate-limit", map[string]any{"limit": 1, "window_s": 31536001}), "config.window_s"},
		{"POST", "/api/v1/plugins", plugin("hsts", map[string]any{"max_age_s": maxInt64}), "config.max_age_s"},
		{"POST", "/api/v1/plugins", plugin("hsts", map[string]any{"max_age_s": 315360001}), "config.max_age_s"},
		{"POST", "/api/v1/plugins", plugin("proxy-cache", map[string]any{"ttl_s": maxInt64}), "config.ttl_s"},
		{"POST", "/api/v1/plugins", plugin("proxy-cache", map[string]any{"max_body_bytes": maxInt64}), "config.max_body_bytes"},
		{"POST", "/api/v1/plugins", plugin("proxy-cache", map[string]any{"vary_headers": []string{"X\nY"}}), "config.vary_headers[0]"},
		{"POST", "/api/v1/plugins", plugin("request-size-limit", map[string]any{"max_bytes": maxInt64}), "config.max_bytes"},
		{"POST", "/api/v1/plugins", plugin("response-body-transform", map[string]any{"max_body_bytes": maxInt64}), "config.max_body_bytes"},
		{"POST", "/api/v1/plugins", plugin("response-compression", map[string]any{"min_length": maxInt64}), "config.min_length"},
		{"POST", "/api/v1/plugins", plugin("cors", map[string]any{"max_age_s": maxInt64}), "config.max_age_s"},
		{"POST", "/api/v1/plugins", plugin("cors", map[string]any{"expose_headers": []string{"X-A\r\n"}}), "config.expose_headers[0]"},
		{"POST", "/api/v1/plugins", plugin("jwt", map[string]any{"maximum_expiration_s": maxInt64}), "config.maximum_expiration_s"},
		{"POST", "/api/v1/plugins", plugin("jwt", map[string]any{"key_claim_name": "a\nb"}), "config.key_claim_name"},
		{"POST", "/api/v1/plugins", plugin("key-auth", map[string]any{"key_names": []string{"api key"}}), "config.key_names[0]"},
		{"POST", "/api/v1/plugins", plugin("basic-auth", map[string]any{"realm": "a\"b"}), "config.realm"},
		{"POST", "/api/v1/plugins", plugin("acl", map[string]any{"allow": []string{"g\r\n"}}), "config.allow[0]"},
		{"POST", "/api/v1/plugins", plugin("ip-restriction", map[string]any{"allow": []string{"10.0.0.0/8\n"}}), "config.allow[0]"},
		{"POST", "/api/v1/plugins", map[string]any{"type": "cors", "scope": "global", "ordering": int64(1) << 31}, "ordering"},
		// consumers and credentials
		{"POST", "/api/v1/consumers", map[string]any{"username": "bob\r\nX-Evil: 1"}, "username"},
		{"POST", "/api/v1/consumers", map[string]any{"username": "  "}, "username"},
		{"POST", "/api/v1/consumers", map[string]any{"username": big(129)}, "username"},
		{"POST", "/api/v1/consumers", map[string]any{"username": "u", "custom_id": "a\nb"}, "custom_id"},
		{"POST", "/api/v1/consumers", map[string]any{"username": "u", "groups": []string{"g", "a\r\nb"}}, "groups[1]"},
		{"POST", "/api/v1/consumers", map[string]any{"username": "u", "groups": []string{"a,b"}}, "groups[0]"},
		{"POST", "/api/v1/consumers", map[string]any{"username": "u", "groups": []any{1}}, "groups[0]"},
		{"POST", "/api/v1/consumers", map[string]any{"username": "u", "groups": many(101, "g")}, "groups"},
		{"PUT", "/api/v1/consumers/" + itoa(cid), map[string]any{"username": "c\n"}, "username"},
		// text as written: invalid UTF-8 and unpaired surrogate escapes
		// are refused, not turned into U+FFFD (two inputs, one stored value)
		{"POST", "/api/v1/consumers", "{\"username\":\"u\xff\"}", "username"},
		{"POST", "/api/v1/consumers", `{"username":"u","groups":["g\udc00"]}`, "groups[0]"},
		{"POST", "/api/v1/consumers/" + itoa(cid) + "/credentials", map[string]any{"type": "key-auth", "key": "k\r\n"}, "key"},
		{"POST", "/api/v1/consumers/" + itoa(cid) + "/credentials", map[string]any{"type": "key-auth", "key": big(1025)}, "key"},
		{"POST", "/api/v1/consumers/" + itoa(cid) + "/credentials", map[string]any{"type": "basic-auth", "username": "u\n", "password": "p"}, "username"},
		{"POST", "/api/v1/consumers/" + itoa(cid) + "/credentials", "{\"type\":\"basic-auth\",\"username\":\"u\",\"password\":\"p\xc0\xc1\"}", "password"},
		{"POST", "/api/v1/consumers/" + itoa(cid) + "/credentials", map[string]any{"type": "jwt", "secret": "s\x00"}, "secret"},
		{"POST", "/api/v1/consumers/" + itoa(cid) + "/credentials", map[string]any{"type": "jwt", "algorithm": "RS256", "public_key": "-----BEGIN PUBLIC KEY-----\x01"}, "public_key"},
		// certificates
		{"POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"a b.example"}}, "domains[0]"},
		{"POST", "/api/v1/certificates", map[string]any{"acme": true, "domains": []string{"a.example\r\n"}}, "domains[0]"},
		{"POST", "/api/v1/certificates", map[string]any{"cert": big(1<<20 + 1), "key": "k"}, "cert"},
		{"POST", "/api/v1/certificates", map[string]any{"cert": "-----BEGIN CERTIFICATE-----\x00", "key": "k"}, "cert"},
		// users and SSO
		{"POST", "/api/v1/users", map[string]any{"email": "a@example.com", "role": "viewer", "password": "password-1", "name": "a\r\nb"}, "name"},
		{"POST", "/api/v1/users", map[string]any{"email": "a@example.com", "role": "viewer", "password": "password-1", "name": "  "}, "name"},
		{"POST", "/api/v1/users", "{\"email\":\"a@example.com\",\"role\":\"viewer\",\"password\":\"\xff\xfepassword1\"}", "password"},
		{"PUT", "/api/v1/sso/config", map[string]any{"issuer": "https://:443/", "client_id": "x"}, "issuer"},
		{"PUT", "/api/v1/acme/eab", map[string]any{"directory_url": "http://acme.example/dir", "key_id": "k", "hmac_key": "aGVsbG8"}, "directory_url"},
		{"PUT", "/api/v1/sso/config", map[string]any{"issuer": "https://idp.example", "client_id": "x", "allowed_domains": []string{"example.com\r\n"}}, "allowed_domains[0]"},
		{"PUT", "/api/v1/sso/config", map[string]any{"issuer": "https://idp.example", "client_id": "x", "allowed_domains": []string{"a b.com"}}, "allowed_domains[0]"},
		{"PUT", "/api/v1/sso/config", map[string]any{"issuer": "https://idp.example", "client_id": "x\n"}, "client_id"},
		{"PUT", "/api/v1/sso/config", map[string]any{"issuer": "https://idp.example", "client_id": "x", "label": "a\nb"}, "label"},
	}
	before := listing(t, g, "/api/v1/services", "/api/v1/services/"+itoa(sid)+"/targets", "/api/v1/routes", "/api/v1/stream-routes",
		"/api/v1/plugins", "/api/v1/consumers", "/api/v1/consumers/"+itoa(cid)+"/credentials", "/api/v1/certificates", "/api/v1/users", "/api/v1/sso/config")
	for _, c := range cases {
		wantRefused(t, g, c)
	}
	after := listing(t, g, "/api/v1/services", "/api/v1/services/"+itoa(sid)+"/targets", "/api/v1/routes", "/api/v1/stream-routes",
		"/api/v1/plugins", "/api/v1/consumers", "/api/v1/consumers/"+itoa(cid)+"/credentials", "/api/v1/certificates", "/api/v1/users", "/api/v1/sso/config")
	if before != after {
		t.Errorf("refused input changed the store:\nbefore %s\nafter  %s", before, after)
	}

	// Settings (admin): acme_email, listeners, trusted proxies.
	settings := g.Must("GET", "/api/v1/settings", nil)
	delete(settings, "updated_at")
	for field, v := range map[string]any{
		"acme_email":         "a@example.com\r\nBcc: x@example.com",
		"http_listen":        "127.0.0.1:80 ",
		"public_url":         "https://a.example/\n",
		"acme_directory_url": "http://acme.example/directory",
		"trusted_proxies":    []string{"10.0.0.1", "10.0.0.2\n"},
	} {
		body := map[string]any{}
		for k, x := range settings {
			body[k] = x
		}
		body[field] = v
		want := field
		if field == "trusted_proxies" {
			want = "trusted_proxies[1]"
		}
		wantRefused(t, g, hostile{"PUT", "/api/v1/settings", body, want})
	}
	settings["public_url"] = "http://:8080"
	wantRefused(t, g, hostile{"PUT", "/api/v1/settings", settings, "public_url"})
	settings["public_url"] = ""
	settings["acme_email"] = "not an email"
	wantRefused(t, g, hostile{"PUT", "/api/v1/settings", settings, "acme_email"})

	// Values at the bounds are accepted.
	g.Must("PUT", "/api/v1/services/"+itoa(sid), map[string]any{"name": big(255), "connect_timeout_ms": 3600000, "read_timeout_ms": 3600000,
		"write_timeout_ms": 3600000, "retries": 100, "tls_sni": big(253), "health_path": "/" + big(4095)})
	g.Must("POST", "/api/v1/plugins", plugin("hsts", map[string]any{"max_age_s": 315360000}))
	g.Must("POST", "/api/v1/plugins", plugin("request-termination", map[string]any{"status": 503, "body": "<html>\r\n\t<p>down</p>\n</html>"}))
	// An IPv6 target is given without brackets (the dial address adds them).
	g.Must("POST", "/api/v1/services/"+itoa(sid)+"/targets", map[string]any{"host": "::1", "port": 80})
}

// The numbers of issue #7: a timeout of 2^63-1 was stored and then broke
// every later route mutation. It is refused, and mutations keep working.
func TestHugeTimeoutRefusedAndMutationsWork(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s")
	for _, f := range []string{"connect_timeout_ms", "read_timeout_ms", "write_timeout_ms"} {
		g.WantError(400, "PUT", "/api/v1/services/"+itoa(sid), map[string]any{"name": "s", f: int64(1<<63 - 1)}, f+": must be at most 3600000")
	}
	g.Route("r", sid, testgw.Paths("/a"))
}

// A consumer username with CRLF would become a header that breaks every
// request of that consumer: it is refused, and a consumer's identity
// headers reach the upstream intact.
func TestConsumerUsernameNeverBreaksHeaders(t *testing.T) {
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s", r.Header.Get("X-Consumer-Username"), r.Header.Get("X-Evil"))
	})
	g := testgw.Start(t, nil)
	sid := g.Service("s", strings.TrimPrefix(up.URL, "http://"))
	rid := g.Route("r", sid, testgw.Paths("/"))
	addPlugin(t, g, "key-auth", "route", rid, nil)
	g.WantError(400, "POST", "/api/v1/consumers", map[string]any{"username": "bob\r\nX-Evil: 1"}, "username")
	cid := testgw.ID(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "bob"}))
	g.WantError(400, "PUT", "/api/v1/consumers/"+itoa(cid), map[string]any{"username": "bob\r\nX-Evil: 1"}, "username")
	g.Must("POST", "/api/v1/consumers/"+itoa(cid)+"/credentials", map[string]any{"type": "key-auth", "key": "bob-key"})
	p := send(t, g, "GET", "/", nil, "apikey", "bob-key")
	if p.Status != 200 || p.Body != "bob|" {
		t.Fatalf("proxied: %d %q", p.Status, p.Body)
	}
}

// Path ids have one form: digits without sign, leading zero or space,
// within int64. Anything else is 400 naming the parameter, on every
// endpoint with an id (a valid id that does not exist stays 404, or [] for
// the lists of a parent).
func TestStrictPathIDs(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s")
	cid := testgw.ID(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "c"}))
	if sid != 1 || cid != 1 {
		t.Fatalf("ids %d %d", sid, cid)
	}
	bad := []string{"01", "+1", "-1", "0", "abc", "1.0", "%201", "1%20", "1e0", "0x1", "9223372036854775808", "99999999999999999999", "１"}
	for _, id := range bad {
		for _, c := range []struct{ method, path, param string }{
			{"GET", "/api/v1/services/%s", "id"},
			{"PUT", "/api/v1/services/%s", "id"},
			{"DELETE", "/api/v1/services/%s", "id"},
			{"GET", "/api/v1/services/%s/targets", "service_id"},
			{"POST", "/api/v1/services/%s/targets", "service_id"},
			{"PUT", "/api/v1/targets/%s", "id"},
			{"GET", "/api/v1/routes/%s", "id"},
			{"DELETE", "/api/v1/stream-routes/%s", "id"},
			{"GET", "/api/v1/plugins/%s", "id"},
			{"GET", "/api/v1/consumers/%s", "id"},
			{"GET", "/api/v1/consumers/%s/credentials", "consumer_id"},
			{"POST", "/api/v1/consumers/%s/credentials", "consumer_id"},
			{"DELETE", "/api/v1/credentials/%s", "id"},
			{"DELETE", "/api/v1/certificates/%s", "id"},
			{"POST", "/api/v1/certificates/%s/renew", "id"},
			{"PUT", "/api/v1/users/%s", "id"},
			{"DELETE", "/api/v1/users/%s", "id"},
		} {
			var body any
			if c.method == "POST" || c.method == "PUT" {
				body = map[string]any{}
			}
			g.WantError(400, c.method, fmt.Sprintf(c.path, id), body, c.param+": ")
		}
	}
	// The canonical form works; a valid id of nothing is 404 or [].
	g.Must("GET", "/api/v1/services/1", nil)
	g.WantError(404, "GET", "/api/v1/services/9223372036854775807", nil)
	if st, b := g.Do("GET", "/api/v1/services/2/targets", nil); st != 200 || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("targets of a missing service: %d %s", st, b)
	}
}

// JSON bodies: a string where the import wants the number 1 is 400, and a
// wrong type inside an array is named by its index.
func TestImportAndBodyTypes(t *testing.T) {
	g := testgw.Start(t, nil)
	for _, v := range []string{`"1"`, `1.0`, `true`, `2`, `null`} {
		g.WantError(400, "POST", "/api/v1/import", `{"format":"gateway-export","version":`+v+`}`, "version: ")
	}
	g.WantError(400, "POST", "/api/v1/import", `{"format":"gateway-export","version":1,"consumers":[{"username":"u","groups":[1]}]}`, "consumers[0].groups[0]: must be a string")
	g.WantError(400, "POST", "/api/v1/import", `{"format":"gateway-export","version":1,"consumers":[{"username":"u\r\nX: 1"}]}`, "consumers[0].username: ")
	g.WantError(400, "POST", "/api/v1/import", `{"format":"gateway-export","version":1,"services":[{"name":"s","connect_timeout_ms":9223372036854775807}]}`, "services[0].connect_timeout_ms: ")
	g.WantError(400, "POST", "/api/v1/consumers", `{"username":"u","groups":[1]}`, "groups[0]: must be a string")
	g.WantError(400, "POST", "/api/v1/routes", `{"name":"r","service_id":"1"}`, "service_id: must be an integer")
	g.Must("POST", "/api/v1/import", `{"format":"gateway-export","version":1}`)
}

// A stream route's listen_addr is a literal IP:port or :port with a port
// 1..65535 that collides with none of the gateway's listeners; the
// settings' listeners must not take the admin listeners either.
func TestListenAddrCollisions(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s")
	admin := strings.TrimPrefix(g.AdminURL, "http://")
	_, adminPort, _ := net.SplitHostPort(admin)
	_, caddyPort, _ := net.SplitHostPort(g.CaddyAdmin)
	cp := controlplane.Current()
	httpsAddr := cp.Boot().HTTPSListen
	_, httpsPort, _ := net.SplitHostPort(httpsAddr)
	free := testgw.FreeAddr(t)
	_, freePort, _ := net.SplitHostPort(free)
	first := g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "a", "listen_addr": free, "service_id": sid})
	for _, addr := range []string{
		admin, ":" + adminPort, "0.0.0.0:" + adminPort, "[::]:" + adminPort,
		g.CaddyAdmin, ":" + caddyPort,
		g.ProxyAddr, httpsAddr, ":" + httpsPort,
		":" + freePort, "0.0.0.0:" + freePort, // the first stream route
		"localhost:7000", "example.com:7000", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:01",
		"127.0.0.1:-1", "127.0.0.1:http", ":", "", "fe80::1%lo:7000", "127.0.0.1 :7000",
	} {
		wantRefused(t, g, hostile{"POST", "/api/v1/stream-routes", map[string]any{"name": "x", "listen_addr": addr, "service_id": sid}, "listen_addr"})
	}
	// The route may keep its own address; other literal addresses work.
	g.Must("PUT", "/api/v1/stream-routes/"+itoa(testgw.ID(first)), map[string]any{"name": "a2", "listen_addr": free, "service_id": sid})
	g.Must("POST", "/api/v1/stream-routes", map[string]any{"name": "b", "listen_addr": "[::1]:" + freePort, "service_id": sid})
	// Settings: a proxy listener on the admin API, Caddy's admin endpoint
	// or a stream route is refused.
	settings := g.Must("GET", "/api/v1/settings", nil)
	delete(settings, "updated_at")
	for _, c := range []struct{ field, addr string }{
		{"http_listen", admin}, {"http_listen", ":" + adminPort}, {"https_listen", g.CaddyAdmin}, {"http_listen", free},
	} {
		body := map[string]any{}
		for k, v := range settings {
			body[k] = v
		}
		body[c.field] = c.addr
		wantRefused(t, g, hostile{"PUT", "/api/v1/settings", body, c.field})
	}
	g.Must("PUT", "/api/v1/settings", settings)
}

// Unknown paths under /api/ need credentials once authentication is on
// (401 before 404); a path served for other methods is 405 with Allow.
func TestUnknownPathsAndMethods(t *testing.T) {
	g := testgw.Start(t, nil)
	check := func(status int, method, path, allow string, hdr ...string) {
		t.Helper()
		req, _ := http.NewRequest(method, g.AdminURL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct{ Error string }
		if json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error == "" {
			if method != "HEAD" {
				t.Errorf("%s %s: no {error} body", method, path)
			}
		}
		if resp.StatusCode != status || resp.Header.Get("Allow") != allow {
			t.Errorf("%s %s: %d Allow %q, want %d Allow %q", method, path, resp.StatusCode, resp.Header.Get("Allow"), status, allow)
		}
	}
	// Open mode: 404 and 405.
	check(404, "GET", "/api/v1/nope", "")
	check(404, "GET", "/api/v1/services/1/nope", "")
	check(405, "PATCH", "/api/v1/services", "GET, HEAD, POST")
	check(405, "POST", "/api/v1/services/1", "GET, HEAD, PUT, DELETE")
	check(405, "DELETE", "/api/v1/settings", "GET, HEAD, PUT")
	check(405, "POST", "/healthz", "GET, HEAD")
	// A path net/http would redirect to its clean form is no endpoint,
	// answered in JSON (not a 307 with an HTML body).
	check(404, "GET", "/api/v1/services//targets", "")
	check(404, "POST", "/api/v1/./services", "")
	check(404, "GET", "/api/v1/services/../settings", "")
	// Authentication on: 401 first, then 404 / 405 with credentials.
	var tok struct{ Token string }
	if st := g.JSON("POST", "/api/v1/admin/token", nil, &tok); st != 200 {
		t.Fatalf("admin token: %d", st)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/nope"}, {"POST", "/api/v1/nope"}, {"GET", "/api/v1/services/1/nope"}, {"GET", "/api/v1"},
		{"GET", "/api/v2/services"}, {"PATCH", "/api/v1/services"}, {"POST", "/api/v1/services/1"},
		{"GET", "/api/v1/services//targets"},
	} {
		check(401, c.method, c.path, "")
		check(401, c.method, c.path, "", "Authorization", "Bearer wrong")
	}
	auth := []string{"Authorization", "Bearer " + tok.Token}
	check(404, "GET", "/api/v1/nope", "", auth...)
	check(405, "PATCH", "/api/v1/services", "GET, HEAD, POST", auth...)
	check(405, "POST", "/api/v1/services/1", "GET, HEAD, PUT, DELETE", auth...)
	// Public paths stay public: their 405 needs no credentials.
	check(405, "GET", "/api/v1/auth/login", "POST")
	check(405, "POST", "/healthz", "GET, HEAD")
	check(404, "GET", "/nope", "")
	// The OpenAPI document says so.
	st, b := g.Do("GET", "/openapi.json", nil)
	if st != 200 || !strings.Contains(string(b), "401 before 404") || !strings.Contains(string(b), "405 with an Allow") {
		t.Errorf("the OpenAPI document does not describe unknown paths and methods")
	}
}
