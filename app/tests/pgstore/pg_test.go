// Package pgstore runs the gateway on a real PostgreSQL server, started by
// the test in a temporary folder on 127.0.0.1 (Debian's postgresql package;
// `make test` installs it). Without the server binaries the test is skipped.
package pgstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/pgtest"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm"
)

// pgGateway starts a PostgreSQL server and an in-process gateway on it.
func pgGateway(t *testing.T) *testgw.Gateway {
	t.Helper()
	return testgw.StartOnPostgres(t)
}

func TestGatewayOnPostgres(t *testing.T) {
	g := pgGateway(t)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("pg " + r.URL.Path)) })
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

// TestStoredVersionThatDoesNotLoad: a configuration another node committed
// that does not load on this one (written here straight into the store, as
// a newer node might during a rolling upgrade) leaves the node serving what
// it has, and the node tries that version again only after a backoff (each
// try compiles the whole configuration), not at every check, and fails
// again; a newer version is tried at once.
func TestStoredVersionThatDoesNotLoad(t *testing.T) {
	g := pgGateway(t)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("up")) })
	rid := g.Route("r", g.Service("s", strings.TrimPrefix(up.URL, "http://")), testgw.Paths("/ok"))
	cp := controlplane.Current()
	applied := cp.AppliedConfigVersion()

	commit := func(paths string) {
		t.Helper()
		err := cp.Store().DB.Transaction(func(tx *gorm.DB) error {
			if _, err := cp.Store().BumpConfigVersion(tx); err != nil {
				return err
			}
			return tx.Exec("UPDATE routes SET paths = ?, updated_at = ? WHERE id = ?", paths, time.Now().UTC(), rid).Error
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	commit(`["/ok", "~("]`) // a regex RE2 refuses
	failures := 0
	for i := 0; i < 5; i++ {
		changed, err := cp.SyncFromStore(context.Background())
		var se *controlplane.SyncError
		switch {
		case errors.As(err, &se):
			failures++
		case err != nil || changed:
			t.Fatalf("check %d: changed %v, %v", i, changed, err)
		}
	}
	// One try at most: the node's own syncer may have made it first.
	if failures > 1 {
		t.Fatalf("the version that does not load was compiled %d times in a row, want once and then a backoff", failures)
	}
	if v := cp.AppliedConfigVersion(); v != applied {
		t.Fatalf("applied version %d, want %d (the last that loaded)", v, applied)
	}
	g.WantGet("", "/ok", 200, "up")

	// After the backoff the version is tried again and fails again: the
	// routes that did not load are read again, not taken as loaded (the
	// table is updated from changed rows only).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		changed, err := cp.SyncFromStore(context.Background())
		if changed || cp.AppliedConfigVersion() != applied {
			t.Fatalf("a retry loaded the version that does not load (applied %d): the table missed its routes", cp.AppliedConfigVersion())
		}
		var se *controlplane.SyncError
		if errors.As(err, &se) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the version that does not load was not tried again")
		}
	}
	g.WantGet("", "/ok", 200, "up")

	commit(`["/fixed"]`)
	if changed, err := cp.SyncFromStore(context.Background()); err != nil || (!changed && cp.AppliedConfigVersion() == applied) {
		t.Fatalf("a newer version after a failed one: changed %v, %v", changed, err)
	}
	g.WantGet("", "/fixed", 200, "up")
}

// TestFailedCommitNotRestored: a change that loaded but whose commit
// failed, on a node that could not then load the stored configuration
// back, left the node serving the uncommitted config labelled with the
// version the failed transaction took. Another node's next commit takes
// that number; the node, comparing numbers only, took its own config for
// that commit and never loaded it. The commit is failed here by a
// deferred trigger (raised at COMMIT), and the restore by a stored version
// that does not load on this node (written straight into the store, as in
// TestStoredVersionThatDoesNotLoad), which the failed change itself had
// repaired in its transaction.
func TestFailedCommitNotRestored(t *testing.T) {
	g := pgGateway(t)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("up")) })
	rid := g.Route("r", g.Service("s", strings.TrimPrefix(up.URL, "http://")), testgw.Paths("/ok"))
	cp := controlplane.Current()
	db := cp.Store().DB
	commit := func(paths string) {
		t.Helper()
		err := db.Transaction(func(tx *gorm.DB) error {
			if _, err := cp.Store().BumpConfigVersion(tx); err != nil {
				return err
			}
			return tx.Exec("UPDATE routes SET paths = ?, updated_at = ? WHERE id = ?", paths, time.Now().UTC(), rid).Error
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'commit refused by the test'; END $$`,
		`CREATE CONSTRAINT TRIGGER refuse_commit AFTER UPDATE ON routes DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_commit()`,
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	// The trigger refuses the direct commit too: it goes first.
	if err := db.Exec("ALTER TABLE routes DISABLE TRIGGER refuse_commit").Error; err != nil {
		t.Fatal(err)
	}
	commit(`["/ok", "~("]`) // a regex RE2 refuses: the stored config no longer loads here
	if err := db.Exec("ALTER TABLE routes ENABLE TRIGGER refuse_commit").Error; err != nil {
		t.Fatal(err)
	}
	g.WantGet("", "/ok", 200, "up")

	// The change repairs the route in its transaction, loads, and fails
	// to commit; restoring reads the stored config, which does not load.
	if st, body := g.Do("PUT", fmt.Sprintf("/api/v1/routes/%d", rid), map[string]any{"name": "r", "service_id": 1, "paths": []string{"/uncommitted"}}); st < 500 {
		t.Fatalf("the change whose commit failed answered %d %s", st, body)
	}
	if err := db.Exec("DROP TRIGGER refuse_commit ON routes").Error; err != nil {
		t.Fatal(err)
	}

	// Another node commits the next version: the route repaired its own way.
	commit(`["/fixed"]`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := cp.SyncFromStore(context.Background()); err != nil {
			t.Fatal(err)
		}
		st, _, _ := g.Get("", "/fixed")
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			ust, _, _ := g.Get("", "/uncommitted")
			t.Fatalf("the node never loaded the stored version %d: /fixed answers %d, the uncommitted /uncommitted %d", cp.AppliedConfigVersion(), st, ust)
		}
	}
	g.WantGet("", "/uncommitted", 404)
}

// TestPostgresDSNOutOfCaddyConfig: a DSN given as a runtime placeholder
// (the shipped Caddyfile's database_postgres {env.GATEWAY_POSTGRES_DSN})
// opens the PostgreSQL store, and its password is in neither the config
// Caddy's admin endpoint serves nor Caddy's autosaved config.
func TestPostgresDSNOutOfCaddyConfig(t *testing.T) {
	const password = "planted-pg-password-3b9e" // the server trusts 127.0.0.1: any password passes
	t.Setenv("GATEWAY_TEST_PG_DSN", pgtest.Start(t).DSN+" password="+password)
	g := testgw.Start(t, &testgw.Options{Gateway: map[string]any{"postgres_dsn": "{env.GATEWAY_TEST_PG_DSN}"}})
	g.Must("POST", "/api/v1/services", map[string]any{"name": "on-postgres"})
	if got := g.Must("GET", "/api/v1/cluster", nil); got["mode"] != "postgres" {
		t.Fatalf("the store is not PostgreSQL: %v", got)
	}
	cfg := testgw.CaddyConfig(t, g.CaddyAdmin, "/config/")
	if strings.Contains(cfg, password) || !strings.Contains(cfg, "{env.GATEWAY_TEST_PG_DSN}") {
		t.Errorf("Caddy's config: %s", cfg)
	}
	for path, b := range testgw.CaddyConfigFiles() {
		if strings.Contains(string(b), password) {
			t.Errorf("%s in Caddy's config folder holds the DSN's password", path)
		}
	}
}
