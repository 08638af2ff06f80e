package tests

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// checkAnswer runs the OpenAPI answer check on a made-up answer and reports
// whether it passed.
func checkAnswer(t *testing.T, g *testgw.Gateway, method, path string, status int, body string) bool {
	t.Helper()
	ft := &fakeT{TB: t}
	req, _ := http.NewRequest(method, g.AdminURL+path, nil)
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	rec.WriteHeader(status)
	g.OpenAPI.Check(ft, req, rec.Result(), []byte(body))
	return !ft.failed
}

// Principal.user is a User or null (the Principal of docs/auth.md: role,
// method, user), and the document says so.
func TestOpenAPIPrincipalUserIsUserOrNull(t *testing.T) {
	g := testgw.Start(t, nil)
	user := `{"id":1,"email":"a@example.com","name":"","role":"admin","has_password":true,"sso_linked":false,"created_at":"2026-01-01T00:00:00Z","last_login_at":null}`
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"role":"admin","method":"open","user":null}`, true},
		{`{"role":"admin","method":"session","user":` + user + `}`, true},
		{`{"role":"admin","method":"session","user":{"id":"x"}}`, false},
		{`{"role":"admin","method":"session","user":5}`, false},
		{`{"role":"admin","method":"session","user":{"id":1,"email":"a@example.com","name":"","role":"root","has_password":true,"sso_linked":false,"created_at":"2026-01-01T00:00:00Z","last_login_at":null}}`, false},
	} {
		if got := checkAnswer(t, g, "GET", "/api/v1/auth/me", 200, c.body); got != c.ok {
			t.Errorf("answer %s: passed the check = %v, want %v", c.body, got, c.ok)
		}
	}
	// The real answer validates.
	me := g.Must("GET", "/api/v1/auth/me", nil)
	if me["user"] != nil || me["method"] != "open" {
		t.Fatalf("open-mode principal: %v", me)
	}
}

// A PUT addressing a resource that does not exist is 404, even with a body
// that would not validate (the OpenAPI document: 404 for single-resource
// GET, PUT, DELETE), the same on every resource.
func TestPutMissingResourceIs404BeforeValidation(t *testing.T) {
	g := testgw.Start(t, nil)
	for _, p := range []string{"/api/v1/services/999", "/api/v1/targets/999", "/api/v1/routes/999",
		"/api/v1/plugins/999", "/api/v1/consumers/999", "/api/v1/users/999"} {
		for _, body := range []any{map[string]any{}, `{"bogus": 1}`, `not json`} {
			st, b := g.Do("PUT", p, body)
			wantError(t, st, b, 404, "")
		}
	}
	// An existing one still validates its body.
	sid := g.Service("s")
	st, b := g.Do("PUT", "/api/v1/services/"+itoa(sid), map[string]any{})
	wantError(t, st, b, 400, "name")
}

// Wrong types and unknown fields are 400 naming the field (docs/operations.md),
// nested ones included: a null header value is not a string, and an unknown
// key inside a split is named with its path.
func TestNestedInputErrorsNameTheField(t *testing.T) {
	g := testgw.Start(t, nil)
	sid := g.Service("s")
	for _, c := range []struct {
		body  string
		field string
	}{
		{`{"name":"r","service_id":` + itoa(sid) + `,"headers":{"X-A":null}}`, "headers.X-A: must not be null"},
		{`{"name":"r","service_id":` + itoa(sid) + `,"splits":[{"service_id":` + itoa(sid) + `,"weight":1,"x":1}]}`, "splits[0].x: unknown field"},
		{`{"name":"r","service_id":` + itoa(sid) + `,"splits":[{"weight":1}]}`, "splits[0].service_id: is required"},
	} {
		st, b := g.Do("POST", "/api/v1/routes", c.body)
		wantError(t, st, b, 400, c.field)
	}
	if list := g.List("/api/v1/routes"); len(list) != 0 {
		t.Fatalf("invalid routes were stored: %v", list)
	}
}

// The document names the contract's types and their enums: DeleteResult,
// target health state and check, SsoStatus.config.auto_provision_role
// (Role or null).
func TestOpenAPIDocumentsContractShapes(t *testing.T) {
	g := testgw.Start(t, nil)
	if g.OpenAPI.Doc.Components.Schemas["DeleteResult"] == nil {
		t.Error("no DeleteResult schema")
	}
	health := func(state, check string) string {
		return `[{"target_id":1,"service_id":1,"host":"h","port":1,"address":null,"state":"` + state + `","check":"` + check + `","last_checked_at":null,"last_error":null}]`
	}
	sso := func(role string) string {
		return `{"enabled":true,"config":{"issuer":"https://idp.example.com","client_id":"c","client_secret_set":false,"label":"x","auto_provision_role":` + role + `,"allowed_domains":[]}}`
	}
	for _, c := range []struct {
		path, body string
		ok         bool
	}{
		{"/api/v1/health", health("healthy", "tcp"), true},
		{"/api/v1/health", health("sick", "tcp"), false},
		{"/api/v1/health", health("unknown", "udp"), false},
		{"/api/v1/sso/config", sso(`null`), true},
		{"/api/v1/sso/config", sso(`"editor"`), true},
		{"/api/v1/sso/config", sso(`"root"`), false},
	} {
		if got := checkAnswer(t, g, "GET", c.path, 200, c.body); got != c.ok {
			t.Errorf("GET %s answering %s: passed the check = %v, want %v", c.path, c.body, got, c.ok)
		}
	}
}

// Settings: a fresh store and a PUT leaving fields out both give the
// documented defaults (acme_directory_url letsencrypt, trusted_proxies [],
// https_enabled false, empty public_url and acme_email), and the document
// states them.
func TestSettingsDefaults(t *testing.T) {
	g := testgw.Start(t, nil)
	want := map[string]any{"acme_directory_url": "letsencrypt", "https_enabled": false, "public_url": "", "acme_email": "", "allow_link_local_destinations": false}
	check := func(s map[string]any) {
		t.Helper()
		for k, v := range want {
			if s[k] != v {
				t.Errorf("%s = %v, want %v", k, s[k], v)
			}
		}
		if tp, ok := s["trusted_proxies"].([]any); !ok || len(tp) != 0 {
			t.Errorf("trusted_proxies = %v, want []", s["trusted_proxies"])
		}
	}
	check(g.Must("GET", "/api/v1/settings", nil))
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "acme_directory_url": "zerossl",
		"trusted_proxies": []string{"10.0.0.0/8"}, "acme_email": "a@example.com", "public_url": "https://gw.example.com"})
	check(g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr}))
	props := g.OpenAPI.Doc.Components.Schemas["SettingsInput"].Value.Properties
	if !strings.Contains(props["acme_directory_url"].Value.Description, "Default (also when empty) letsencrypt") ||
		!strings.Contains(props["trusted_proxies"].Value.Description, "Default []") {
		t.Error("SettingsInput does not state the defaults")
	}
}

// Admin request bodies are limited to 20 MiB, those of the public
// endpoints (sign-in) to 64 KiB (docs/operations.md): one byte more is a
// 400 {error}; a body at the limit is read and validated. Anyone may call
// sign-in, and a 20 MiB one cost some 130 MB to read and decode before its
// 400 (a password is at most 4096 characters).
func TestBodyLimits(t *testing.T) {
	g := testgw.Start(t, nil)
	for _, c := range []struct {
		overPath, atPath string
		object           string // %s: the padding
		limit            int
		over, at         string // fragments of the two errors
	}{
		{"/api/v1/services", "/api/v1/routes", `{"name":"%s"}`, 20 << 20, "20 MiB", "service_id"},
		{"/api/v1/auth/login", "/api/v1/auth/login", `{"email":"a@example.com","password":"%s"}`, 64 << 10,
			"request body is larger than 64 KiB", "password: must be at most 4096 characters"},
	} {
		body := func(n int) string {
			return fmt.Sprintf(c.object, strings.Repeat("x", n-len(c.object)+2))
		}
		st, b := g.Do("POST", c.overPath, body(c.limit+1))
		wantError(t, st, b, 400, c.over)
		st, b = g.Do("POST", c.atPath, body(c.limit))
		wantError(t, st, b, 400, c.at)
	}
}

// TestAdminHeaderLimit: the admin listener reads at most 64 KiB of a
// request's header section (431 past it), not Go's 1 MB, before it knows
// who is asking.
func TestAdminHeaderLimit(t *testing.T) {
	g := testgw.Start(t, nil)
	for _, tc := range []struct {
		size int
		want int
	}{{32 << 10, 200}, {128 << 10, 431}} {
		req, _ := http.NewRequest("GET", g.AdminURL+"/api/v1/admin/status", nil)
		req.Header.Set("X-Pad", strings.Repeat("p", tc.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("a %d-byte header: %d, want %d", tc.size, resp.StatusCode, tc.want)
		}
	}
}

// TestOpenAPIMatchesServedRoutes checks the served document against the
// server both ways: every declared endpoint is documented, and every
// documented operation is served (it does not answer the router's "no such
// endpoint" or 405).
func TestOpenAPIMatchesServedRoutes(t *testing.T) {
	g := testgw.Start(t, nil)
	doc := g.OpenAPI.Doc
	served := map[string]bool{}
	for _, ep := range controlplane.Current().Admin().(*api.API).Endpoints() {
		key := ep.Method + " " + ep.Path
		served[key] = true
		item := doc.Paths.Find(ep.Path)
		if item == nil || item.GetOperation(ep.Method) == nil {
			t.Errorf("%s is served but not documented", key)
		}
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(documented)
	param := regexp.MustCompile(`\{[a-z_]+\}`)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, key := range documented {
		if !served[key] {
			t.Errorf("%s is documented but not declared", key)
		}
		method, path, _ := strings.Cut(key, " ")
		if strings.HasSuffix(path, "/events") {
			continue // a stream that never ends
		}
		req, _ := http.NewRequest(method, g.AdminURL+param.ReplaceAllString(path, "999999"), nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed || bytes.Contains(body, []byte("no such endpoint")) {
			t.Errorf("%s is documented but not served: %d %s", key, resp.StatusCode, body)
		}
	}
	if len(documented) < 15 {
		t.Fatalf("only %d operations documented", len(documented))
	}
}

// TestOpenAPIValidatorCatchesMismatch makes sure the answer check used by
// every integration test can fail.
func TestOpenAPIValidatorCatchesMismatch(t *testing.T) {
	g := testgw.Start(t, nil)
	ft := &fakeT{TB: t}
	req, _ := http.NewRequest("GET", g.AdminURL+"/api/v1/services", nil)
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	rec.WriteHeader(200)
	body := []byte(`[{"id":"not-a-number"}]`)
	g.OpenAPI.Check(ft, req, rec.Result(), body)
	if !ft.failed {
		t.Fatal("a wrong answer passed the OpenAPI check")
	}
	ft = &fakeT{TB: t}
	req, _ = http.NewRequest("GET", g.AdminURL+"/api/v1/not-documented", nil)
	g.OpenAPI.Check(ft, req, rec.Result(), []byte(`{}`))
	if !ft.failed {
		t.Fatal("an undocumented served path passed the OpenAPI check")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Helper()               {}

// TestDocsPage serves the embedded reference page.
func TestDocsPage(t *testing.T) {
	g := testgw.Start(t, nil)
	resp, err := http.Get(g.AdminURL + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") || !bytes.Contains(b, []byte("/openapi.json")) {
		t.Fatalf("docs: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if bytes.Contains(b, []byte("https://")) {
		t.Fatal("docs page loads assets from elsewhere")
	}
}

func TestOpenAPIJSONMatchesYAML(t *testing.T) {
	g := testgw.Start(t, nil)
	var doc map[string]any
	if st := g.JSON("GET", "/openapi.json", nil, &doc); st != 200 || doc["openapi"] != "3.1.0" {
		t.Fatalf("/openapi.json: %d %v", st, doc["openapi"])
	}
}
