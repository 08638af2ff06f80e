package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"testing"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/auth"
	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/app/pluginapi"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// Fuzzing of the admin API's input: every resource's JSON body is decoded
// with its declaration (never a panic; a refusal is always a FieldError),
// and what the declaration accepts is sent through a real gateway's admin
// API: never a 500 or a broken connection, never "the compiled
// configuration was rejected" (an accepted value always compiles and loads
// into Caddy), answers match the OpenAPI document, and a created resource
// reads back and deletes. Inputs with outbound effects (targets other than
// loopback, ACME certificates, http-log endpoints elsewhere, listener
// changes) stop after the declaration stage, so fuzzing reaches only
// 127.0.0.1. Seeds: f.Add below and testdata/fuzz/<Target>/.
//
// `make fuzz-short` runs each target for a few seconds.

// fuzzGW is a gateway with authentication on (a user may be created by the
// fuzzer) and one service, route and consumer to refer to.
type fuzzGW struct {
	g             *testgw.Gateway
	sid, rid, cid int64
	settings      map[string]any
}

func startFuzzGW(f *testing.F) *fuzzGW {
	g := testgw.Start(f, nil)
	fg := &fuzzGW{g: g}
	var tok struct{ Token string }
	if st := g.JSON("POST", "/api/v1/admin/token", nil, &tok); st != 200 || tok.Token == "" {
		f.Fatalf("admin token: %d", st)
	}
	g.Header.Set("Authorization", "Bearer "+tok.Token)
	fg.sid = g.Service("s")
	fg.rid = g.Route("r", fg.sid, testgw.Paths("/r"))
	fg.cid = testgw.ID(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "c"}))
	fg.settings = g.Must("GET", "/api/v1/settings", nil)
	// an admin user, so that a fuzzed one is never the last admin
	g.Must("POST", "/api/v1/users", map[string]any{"email": "root@example.com", "role": "admin", "password": "root-password"})
	return fg
}

// send is one admin request from inside a fuzz function.
func (fg *fuzzGW) send(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	var b any // nil: no body, and no Content-Type
	if body != nil {
		b = body
	}
	st, out := fg.g.DoFor(t, method, path, b)
	if st >= 500 {
		t.Fatalf("%s %s %q: %d %s", method, path, body, st, out)
	}
	if bytes.Contains(out, []byte("compiled configuration was rejected")) {
		t.Fatalf("%s %s %q: accepted by validation but Caddy refused the compiled config: %s", method, path, body, out)
	}
	return st, out
}

// roundTrip creates through POST base; an accepted resource must read back
// at get (a format with the new id; "" when it has no GET) and delete at
// del.
func (fg *fuzzGW) roundTrip(t *testing.T, base, get, del string, body []byte) {
	t.Helper()
	st, out := fg.send(t, "POST", base, body)
	if st != 200 {
		if st != 400 {
			t.Fatalf("POST %s %q: %d %s", base, body, st, out)
		}
		return
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("POST %s: answer %s", base, out)
	}
	id := testgw.ID(v)
	if get != "" {
		if st, out := fg.send(t, "GET", fmt.Sprintf(get, id), nil); st != 200 {
			t.Fatalf("GET %s: %d %s", fmt.Sprintf(get, id), st, out)
		}
	}
	if st, out := fg.send(t, "DELETE", fmt.Sprintf(del, id), nil); st != 200 {
		t.Fatalf("DELETE %s: %d %s", fmt.Sprintf(del, id), st, out)
	}
}

// declared decodes body with a declaration: nil or a FieldError, never
// anything else (and never a panic).
func declared(t *testing.T, body []byte, dst any) bool {
	t.Helper()
	err := schema.Decode(body, dst)
	var fe *schema.FieldError
	if err != nil && !errors.As(err, &fe) {
		t.Fatalf("%q: %T %v is not a field error", body, err, err)
	}
	return err == nil
}

func addSeeds(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
}

func FuzzServiceInput(f *testing.F) {
	addSeeds(f, `{"name":"a"}`, `{"name":"a","protocol":"https","tls_sni":"x.example","health_path":"/h","connect_timeout_ms":3600000,"retries":100,"lb_algorithm":"weighted"}`,
		`{"name":"a\r\nb"}`, `{"name":"a","connect_timeout_ms":9223372036854775807}`, `{"name":"a","health_path":"  "}`)
	fg := startFuzzGW(f)
	f.Fuzz(func(t *testing.T, body string) {
		if declared(t, []byte(body), new(storage.Service)) {
			fg.roundTrip(t, "/api/v1/services", "/api/v1/services/%d", "/api/v1/services/%d", []byte(body))
		}
	})
}

func FuzzTargetInput(f *testing.F) {
	addSeeds(f, `{"host":"127.0.0.1","port":9}`, `{"host":"::1","port":65535,"weight":0,"enabled":false}`, `{"host":"a b","port":1}`, `{"host":"127.0.0.1","port":1,"weight":65535}`)
	fg := startFuzzGW(f)
	base := "/api/v1/services/" + itoa(fg.sid) + "/targets"
	f.Fuzz(func(t *testing.T, body string) {
		var tg storage.Target
		if !declared(t, []byte(body), &tg) {
			return
		}
		if ip := net.ParseIP(tg.Host); ip == nil || !ip.IsLoopback() {
			return // health checks would dial it
		}
		fg.roundTrip(t, base, "", "/api/v1/targets/%d", []byte(body))
		// targets have no GET; the list must still read
		if st, out := fg.send(t, "GET", base, nil); st != 200 {
			t.Fatalf("GET %s: %d %s", base, st, out)
		}
	})
}

func FuzzRouteInput(f *testing.F) {
	addSeeds(f, `{"name":"a","service_id":1}`, `{"name":"a","service_id":1,"hosts":["*.example.com","a.example"],"paths":["/a","~/b/[0-9]+"],"methods":["GET"],"headers":{"X-A":"*"},"priority":-5,"strip_path":true}`,
		`{"name":"a","service_id":1,"splits":[{"service_id":1,"weight":65535}]}`, `{"name":"a","service_id":1,"paths":["~("]}`, `{"name":"a","service_id":1,"headers":{"X":"a\r\nb"}}`)
	fg := startFuzzGW(f)
	f.Fuzz(func(t *testing.T, body string) {
		if declared(t, []byte(body), new(storage.Route)) {
			fg.roundTrip(t, "/api/v1/routes", "/api/v1/routes/%d", "/api/v1/routes/%d", []byte(body))
		}
	})
}

func FuzzStreamRouteInput(f *testing.F) {
	addSeeds(f, `{"name":"a","listen_addr":"127.0.0.1:7001","service_id":1}`, `{"name":"a","listen_addr":":7002","service_id":1,"enabled":false}`,
		`{"name":"a","listen_addr":"[::1]:7003","service_id":1}`, `{"name":"a","listen_addr":"localhost:7004","service_id":1}`, `{"name":"a","listen_addr":"127.0.0.1:0","service_id":1}`)
	fg := startFuzzGW(f)
	f.Fuzz(func(t *testing.T, body string) {
		if declared(t, []byte(body), new(storage.StreamRoute)) {
			fg.roundTrip(t, "/api/v1/stream-routes", "", "/api/v1/stream-routes/%d", []byte(body))
		}
	})
}

// pluginTypes are the registered plugin type names, sorted.
func pluginTypes() []string {
	var out []string
	for _, t := range plugins.Types() {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return out
}

func FuzzPluginInput(f *testing.F) {
	seeds := map[string][]string{
		"request-id":              {`{"header_name":"X-Id","trust_incoming":false}`},
		"ip-restriction":          {`{"allow":["127.0.0.1","10.0.0.0/8"],"status":403}`, `{"deny":["::1"]}`},
		"cors":                    {`{"allow_origins":["https://*.example.com"],"allow_credentials":true,"max_age_s":86400}`},
		"redirect":                {`{"to_https":true}`, `{"location":"https://x.example","status":301}`},
		"key-auth":                {`{"key_names":["apikey","X-Key"],"hide_credentials":true}`},
		"basic-auth":              {`{"realm":"r"}`},
		"jwt":                     {`{"claims_to_verify":["exp","nbf"],"maximum_expiration_s":315360000}`},
		"acl":                     {`{"allow":["g"]}`, `{"deny":["g","h"],"hide_groups_header":true}`},
		"rate-limit":              {`{"limit":1000000000,"window_s":31536000,"key":"header","header_name":"X-K"}`, `{"limit":9223372036854775807}`},
		"request-size-limit":      {`{"max_bytes":1099511627776}`, `{"max_bytes":0}`},
		"request-termination":     {`{"status":503,"body":"<p>\r\n\tdown</p>","content_type":"text/html"}`},
		"proxy-cache":             {`{"ttl_s":31536000,"max_body_bytes":1073741824,"vary_headers":["Accept"],"status_codes":[200]}`},
		"request-transform":       {`{"set_headers":{"X-A":"{http.request.uri.path}"},"remove_headers":["X-*"],"set_query":{"a":"b"}}`},
		"response-transform":      {`{"rename_headers":{"Server":"X-Server"},"add_headers":{"X-B":"b"}}`},
		"response-body-transform": {`{"replace":[{"pattern":"a(b)","with":"$1\n"}],"json_remove":["a.b"],"json_set":{"c":1}}`},
		"response-compression":    {`{"encodings":["gzip"],"min_length":1073741824}`},
		"hsts":                    {`{"max_age_s":315360000,"include_subdomains":true,"preload":true}`},
		"http-log":                {`{"endpoint":"http://127.0.0.1:9/logs","headers":{"Authorization":"Bearer x"},"batch_max_size":10000}`},
		"openid-connect":          {`{"issuer":"https://id.example.com/realms/a","client_id":"web","client_secret":"s","audiences":["a"],"upstream_headers":["X-Userinfo"],"session_ttl_s":2592000,"anonymous":"guest"}`},
		"opentelemetry":           {`{"endpoint":"http://127.0.0.1:9/v1/traces","headers":{"X-Key":"k"},"sampling_ratio":0.25,"propagation":["b3","w3c"],"queue_size":100000}`},
	}
	for typ, cfgs := range seeds {
		for _, c := range cfgs {
			f.Add(typ, c)
		}
	}
	f.Add("cors", `{"allow_headers":["X\r\n"]}`)
	f.Add("hsts", `{"max_age_s":-1}`)
	fg := startFuzzGW(f)
	types := pluginTypes()
	f.Fuzz(func(t *testing.T, typ, cfg string) {
		if _, ok := plugins.Lookup(typ); !ok {
			typ = types[int(crc(typ))%len(types)]
		}
		raw := json.RawMessage(cfg)
		if !json.Valid(raw) {
			raw = json.RawMessage(strconv.Quote(cfg)) // still JSON: a string where an object belongs
		}
		norm, err := plugins.NormalizeConfig(typ, raw)
		var fe *schema.FieldError
		if err != nil {
			if !errors.As(err, &fe) {
				t.Fatalf("%s %q: %T %v is not a field error", typ, cfg, err, err)
			}
			return
		}
		if typ == "wasm" {
			return // needs an uploaded module
		}
		if typ == "http-log" || typ == "opentelemetry" {
			var c struct{ Endpoint string }
			_ = json.Unmarshal(norm, &c)
			if u, err := url.Parse(c.Endpoint); err != nil || u.Hostname() != "127.0.0.1" {
				return // it would send records or spans there
			}
		}
		body, _ := json.Marshal(map[string]any{"type": typ, "scope": "route", "route_id": fg.rid, "config": raw})
		fg.roundTrip(t, "/api/v1/plugins", "/api/v1/plugins/%d", "/api/v1/plugins/%d", body)
	})
}

func crc(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

func FuzzConsumerInput(f *testing.F) {
	addSeeds(f, `{"username":"u"}`, `{"username":"u","custom_id":"c-1","groups":["a","b"]}`, `{"username":"bob\r\nX-Evil: 1"}`, `{"username":"u","groups":[1]}`)
	fg := startFuzzGW(f)
	f.Fuzz(func(t *testing.T, body string) {
		if declared(t, []byte(body), new(storage.Consumer)) {
			fg.roundTrip(t, "/api/v1/consumers", "/api/v1/consumers/%d", "/api/v1/consumers/%d", []byte(body))
		}
	})
}

func FuzzCredentialInput(f *testing.F) {
	addSeeds(f, `{"type":"key-auth"}`, `{"type":"key-auth","key":"k-1"}`, `{"type":"basic-auth","username":"u","password":"p"}`,
		`{"type":"jwt","secret":"s"}`, `{"type":"jwt","algorithm":"HS512","key":"iss-1","secret":"s"}`, `{"type":"jwt","algorithm":"RS256","public_key":"-----BEGIN PUBLIC KEY-----\nAA==\n-----END PUBLIC KEY-----\n"}`)
	fg := startFuzzGW(f)
	base := "/api/v1/consumers/" + itoa(fg.cid) + "/credentials"
	f.Fuzz(func(t *testing.T, body string) {
		if declared(t, []byte(body), new(pluginapi.Credential)) {
			fg.roundTrip(t, base, "", "/api/v1/credentials/%d", []byte(body))
		}
	})
}

func FuzzCertificateInput(f *testing.F) {
	addSeeds(f, `{"cert":"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n","key":"-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"}`,
		`{"acme":true,"domains":["a.example","*.b.example"],"challenge":"dns-01"}`, `{"acme":true,"domains":["a b"]}`, `{"cert":"x","key":"y"}`)
	fg := startFuzzGW(f)
	f.Fuzz(func(t *testing.T, body string) {
		var in certs.Certificate
		if !declared(t, []byte(body), &in) || in.ACME {
			return // ACME certificates would contact a CA
		}
		fg.roundTrip(t, "/api/v1/certificates", "", "/api/v1/certificates/%d", []byte(body))
	})
}

func FuzzSettingsInput(f *testing.F) {
	addSeeds(f, `{}`, `{"public_url":"https://admin.example","acme_email":"a@example.com","acme_directory_url":"zerossl","trusted_proxies":["10.0.0.0/8","::1"]}`,
		`{"http_listen":":8080","https_listen":":8443","https_enabled":true}`, `{"acme_email":"a@b\r\nc"}`, `{"http_listen":"127.0.0.1:9080"}`)
	fg := startFuzzGW(f)
	f.Fuzz(func(t *testing.T, body string) {
		if !declared(t, []byte(body), new(storage.Settings)) {
			return
		}
		// Listener changes bind at once: keep the gateway's own.
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		for _, k := range []string{"http_listen", "https_listen", "https_enabled"} {
			m[k] = fg.settings[k]
		}
		b, _ := json.Marshal(m)
		if st, out := fg.send(t, "PUT", "/api/v1/settings", b); st != 200 && st != 400 {
			t.Fatalf("PUT settings %s: %d %s", b, st, out)
		}
	})
}

func FuzzUserInput(f *testing.F) {
	addSeeds(f, `{"email":"a@example.com","role":"viewer","password":"password-1"}`, `{"email":"b@example.com","role":"admin","password":"password-1","name":"B"}`,
		`{"email":"a@example.com","role":"viewer","password":"password-1","name":"a\r\nb"}`)
	fg := startFuzzGW(f)
	f.Fuzz(func(t *testing.T, body string) {
		if declared(t, []byte(body), new(auth.User)) {
			fg.roundTrip(t, "/api/v1/users", "", "/api/v1/users/%d", []byte(body))
		}
	})
}

// FuzzPathID: an accepted path id is exactly the canonical decimal of a
// positive int64.
func FuzzPathID(f *testing.F) {
	for _, s := range []string{"1", "01", "+1", "-1", "0", "9223372036854775807", "9223372036854775808", " 1", "1.0", "abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := api.ParseID(s)
		if ok != (n > 0 && strconv.FormatInt(n, 10) == s) {
			t.Fatalf("ParseID(%q) = %d, %v", s, n, ok)
		}
		if m, err := strconv.ParseInt(s, 10, 64); err == nil && m > 0 && strconv.FormatInt(m, 10) == s && !ok {
			t.Fatalf("ParseID(%q) refused a canonical id", s)
		}
	})
}
