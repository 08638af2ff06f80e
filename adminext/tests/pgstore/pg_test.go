// Package pgstore runs the gateway on a real PostgreSQL server, started by
// the test in a temporary folder on 127.0.0.1 (Debian's postgresql package;
// `make test` installs it). Without the server binaries the test is skipped.
package pgstore

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/adminext/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/pgtest"
	"github.com/caddy-gateway/gateway/modules/wasm/proxywasm"
)

func TestGatewayOnPostgres(t *testing.T) {
	dsn := pgtest.Start(t).DSN
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"database": "postgres", "dsn": dsn}})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("pg " + r.URL.Path)) }))
	defer up.Close()
	sid := g.Service("s", strings.TrimPrefix(up.URL, "http://"))
	rid := g.Route("r", sid, map[string]any{"hosts": []string{"*.example.com"}, "paths": []string{"/api"}, "strip_path": true,
		"headers": map[string]string{"X-A": "*"}, "splits": []any{map[string]any{"service_id": sid, "weight": 2}}})
	req, _ := http.NewRequest("GET", g.ProxyURL+"/api/x", nil)
	req.Host = "a.example.com"
	req.Header.Set("X-A", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("proxy on a postgres store: %v %v", resp, err)
	}
	resp.Body.Close()
	got := g.Must("GET", fmt.Sprintf("/api/v1/routes/%d", rid), nil)
	if got["hosts"].([]any)[0] != "*.example.com" || got["headers"].(map[string]any)["X-A"] != "*" {
		t.Fatalf("route read back: %v", got)
	}
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-id", "scope": "route", "route_id": rid})
	c := g.Must("POST", "/api/v1/consumers", map[string]any{"username": "u", "groups": []string{"g"}})
	st, body := g.Do("POST", "/api/v1/consumers", map[string]any{"username": "u"})
	if st != 400 {
		t.Fatalf("duplicate username on postgres: %d %s", st, body)
	}
	g.Must("DELETE", fmt.Sprintf("/api/v1/consumers/%d", testgw.ID(c)), nil)

	// A WASM module's bytes (bytea) round-trip through the store into the
	// plugin runtime.
	wasm, err := os.ReadFile("../testdata/wasm/as-filter/as-filter.wasm")
	if err != nil {
		t.Fatal(err)
	}
	mod := g.Must("POST", "/api/v1/wasm-modules", map[string]any{"name": "as-filter", "wasm_base64": base64.StdEncoding.EncodeToString(wasm)})
	if st, body := g.Do("POST", "/api/v1/wasm-modules", map[string]any{"name": "as-filter", "wasm_base64": base64.StdEncoding.EncodeToString(wasm)}); st != 400 {
		t.Fatalf("duplicate module name on postgres: %d %s", st, body)
	}
	proxywasm.DropSource(mod["sha256"].(string)) // read back from the store, not the upload
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "wasm", "scope": "route", "route_id": rid, "config": map[string]any{"module": "as-filter", "config": "pg"}})
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-As-Filter") != "pg" {
		t.Fatalf("wasm plugin on a postgres store: %v %v", resp, err)
	}
	resp.Body.Close()

	g.Must("DELETE", fmt.Sprintf("/api/v1/services/%d", sid), nil)
	g.Must("DELETE", fmt.Sprintf("/api/v1/wasm-modules/%d", testgw.ID(mod)), nil)
	var routes []any
	g.JSON("GET", "/api/v1/routes", nil, &routes)
	var plugins []any
	g.JSON("GET", "/api/v1/plugins", nil, &plugins)
	if len(routes) != 0 || len(plugins) != 0 {
		t.Fatalf("cascade on postgres: routes %v plugins %v", routes, plugins)
	}
}
