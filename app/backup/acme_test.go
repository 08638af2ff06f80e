package backup_test

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestACMESection: the Cloudflare token and EAB credentials are in an export
// with secrets only, and an import restores them (or, without an acme
// section, leaves the stored ones alone).
func TestACMESection(t *testing.T) {
	g := start(t, nil)
	mac := base64.RawURLEncoding.EncodeToString([]byte("eab-hmac-key-for-the-backup"))
	dir := "https://127.0.0.1:14000/dir"
	g.Must("PUT", "/api/v1/acme/cloudflare-token", map[string]any{"token": "cf-backup-token"})
	g.Must("PUT", "/api/v1/acme/eab", map[string]any{"directory_url": dir, "key_id": "kid-backup", "hmac_key": mac})

	plain, doc := export(t, g, false)
	if _, ok := doc["acme"]; ok || strings.Contains(string(plain), "cf-backup-token") || strings.Contains(string(plain), mac) {
		t.Fatalf("an export without secrets carries ACME credentials: %s", plain)
	}
	_, full := export(t, g, true)
	acme, _ := full["acme"].(map[string]any)
	eab, _ := acme["eab"].([]any)
	if acme["cloudflare_token"] != "cf-backup-token" || len(eab) != 1 || eab[0].(map[string]any)["hmac_key"] != mac || eab[0].(map[string]any)["key_id"] != "kid-backup" {
		t.Fatalf("acme section: %v", full["acme"])
	}

	configured := func(path string) bool {
		t.Helper()
		return g.Must("GET", path, nil)["configured"] == true
	}
	eabPath := "/api/v1/acme/eab?directory_url=" + dir
	g.Must("DELETE", "/api/v1/acme/cloudflare-token", nil)
	g.Must("DELETE", eabPath, nil)
	if configured("/api/v1/acme/cloudflare-token") || configured(eabPath) {
		t.Fatal("credentials still stored after DELETE")
	}
	importDoc(t, g, full)
	if !configured("/api/v1/acme/cloudflare-token") || !configured(eabPath) {
		t.Fatal("import with an acme section did not restore the credentials")
	}
	// An import without an acme section keeps them.
	delete(full, "acme")
	importDoc(t, g, full)
	if !configured("/api/v1/acme/cloudflare-token") || !configured(eabPath) {
		t.Fatal("import without an acme section dropped the credentials")
	}
	// Bad values are 400 naming the field.
	full["acme"] = map[string]any{"cloudflare_token": nil, "eab": []any{map[string]any{"directory_url": dir, "key_id": "k", "hmac_key": "not base64!"}}}
	wantError(t, g, 400, "POST", "/api/v1/import", full, "acme.eab[0].hmac_key")
	full["acme"] = map[string]any{"cloudflare_token": "  ", "eab": []any{}}
	wantError(t, g, 400, "POST", "/api/v1/import", full, "acme.cloudflare_token")
}
