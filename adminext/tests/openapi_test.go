package tests

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/adminext/api"
	"github.com/caddy-gateway/gateway/adminext/controlplane"
	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
)

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
