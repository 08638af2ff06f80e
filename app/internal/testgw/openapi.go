package testgw

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Validator checks admin API exchanges against the served OpenAPI document:
// the document must load and validate, every request must hit a documented
// operation, and every answer must match its documented status and schema.
type Validator struct {
	Doc    *openapi3.T
	router routers.Router
	base   string
}

// LoadValidator fetches and validates /openapi.yaml.
func LoadValidator(t testing.TB, adminURL string) *Validator {
	t.Helper()
	resp, err := http.Get(adminURL + "/openapi.yaml")
	if err != nil {
		t.Fatalf("fetching /openapi.yaml: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/openapi.yaml: %d %s", resp.StatusCode, body)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(body)
	if err != nil {
		t.Fatalf("loading /openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("/openapi.yaml does not validate: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: adminURL}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("routing /openapi.yaml: %v", err)
	}
	return &Validator{Doc: doc, router: r, base: adminURL}
}

// Check validates one exchange.
func (v *Validator) Check(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	u, _ := url.Parse(v.base + req.URL.RequestURI())
	r2 := req.Clone(context.Background())
	r2.URL = u
	route, params, err := v.router.FindRoute(r2)
	if err != nil {
		if resp.StatusCode == http.StatusNotFound && strings.Contains(string(body), "no such endpoint") {
			return // an undocumented path that the server does not serve either
		}
		if resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "" {
			return // a documented path with a method it is not served for
		}
		if (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && strings.HasPrefix(req.URL.Path, "/api/") {
			return // an unknown path asked without credentials, or a cross-origin request
		}
		t.Errorf("OpenAPI: %s %s is served (status %d) but not documented: %v", req.Method, req.URL.Path, resp.StatusCode, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{
		Request: r2, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true},
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("OpenAPI: answer of %s %s (status %d) does not match the document: %v\nbody: %.500s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
}
