package backup_test

import (
	"regexp"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// A key-auth credential without a key (a hand-written document; an export
// names a left-out key in redacted) is restored as POST of the credential
// creates it: with a random key, which then authenticates.
func TestImportGeneratesAbsentKey(t *testing.T) {
	g := start(t, nil)
	svc := g.Service("ka", testgw.Addr(testgw.Echo(t, "ka")))
	route := g.Route("ka", svc, map[string]any{"paths": []string{"/ka"}})
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": route})
	carol := id(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "carol"}))
	g.Must("POST", p("/api/v1/consumers/%d/credentials", carol), map[string]any{"type": "key-auth", "key": "carol-key-0123456789"})

	_, doc := export(t, g, true)
	cred := doc["consumers"].([]any)[0].(map[string]any)["credentials"].([]any)[0].(map[string]any)
	delete(cred, "key")
	rep := importDoc(t, g, doc)
	if rep.Restored["credentials"] != 1 || len(rep.Skipped) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	carol = id(g.List("/api/v1/consumers")[0])
	creds := g.List(p("/api/v1/consumers/%d/credentials", carol))
	key, _ := creds[0]["key"].(string)
	if len(creds) != 1 || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(key) {
		t.Fatalf("credentials: %v", creds)
	}
	if r := get(t, g, "/ka", "apikey", key); r.Status != 200 || r.Consumer != "carol" {
		t.Fatalf("the generated key: %+v", r)
	}
	if r := get(t, g, "/ka", "apikey", "carol-key-0123456789"); r.Status != 401 {
		t.Fatalf("the document's absent key is not the old one: %+v", r)
	}
}
