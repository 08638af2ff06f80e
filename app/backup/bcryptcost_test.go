package backup_test

import (
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestImportRefusesCostlyPasswordHash: a basic-auth password hash is
// checked on every login attempt, and failures are not cached, so the
// hash's bcrypt cost is what any client may make the gateway spend per
// request. The API hashes with cost 10; an imported hash of cost 31
// (about 2^21 times that, days of a core per request with a wrong
// password) is 400 naming the field, one of cost 10 is restored.
func TestImportRefusesCostlyPasswordHash(t *testing.T) {
	g := start(t, nil)
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	doc := func(cost string) map[string]any {
		hash := "$2a$" + cost + "$" + string(h[7:])
		return map[string]any{"format": "gateway-export", "version": 1,
			"consumers": []any{map[string]any{"username": "alice", "credentials": []any{
				map[string]any{"type": "basic-auth", "username": "alice", "password_hash": hash}}}},
		}
	}
	wantError(t, g, 400, "POST", "/api/v1/import", doc("31"), "consumers[0].credentials[0].password_hash", "cost")
	wantError(t, g, 400, "POST", "/api/v1/import", doc("13"), "consumers[0].credentials[0].password_hash", "cost")
	if rep := importDoc(t, g, doc("10")); rep.Restored["credentials"] != 1 {
		t.Fatalf("a hash of cost 10 was not restored: %+v", rep)
	}
}
