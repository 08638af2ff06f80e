package pluginapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func pemPublic(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func TestConsumerCRUD(t *testing.T) {
	g := start(t)
	alice := g.Must("POST", "/api/v1/consumers", map[string]any{"username": "alice"})
	if alice["custom_id"] != nil || !reflect.DeepEqual(alice["groups"], []any{}) {
		t.Fatalf("defaults: %v", alice)
	}
	if got := slices.Sorted(maps.Keys(alice)); !reflect.DeepEqual(got, []string{"created_at", "custom_id", "groups", "id", "updated_at", "username"}) {
		t.Fatalf("fields: %v", got)
	}
	bob := g.Must("POST", "/api/v1/consumers", map[string]any{"username": "bob", "custom_id": "b-1", "groups": []string{"admins", "ops"}})
	if bob["custom_id"] != "b-1" || !reflect.DeepEqual(bob["groups"], []any{"admins", "ops"}) {
		t.Fatalf("bob: %v", bob)
	}

	g.WantError(400, "POST", "/api/v1/consumers", map[string]any{"username": "alice"}, "username", "taken")
	g.WantError(400, "POST", "/api/v1/consumers", map[string]any{"username": "carol", "custom_id": "b-1"}, "custom_id", "taken")
	g.WantError(400, "POST", "/api/v1/consumers", map[string]any{}, "username", "required")
	g.WantError(400, "POST", "/api/v1/consumers", map[string]any{"username": ""}, "username")
	g.WantError(400, "POST", "/api/v1/consumers", map[string]any{"username": strings.Repeat("x", 129)}, "username", "128")
	g.WantError(400, "POST", "/api/v1/consumers", map[string]any{"username": "c", "groups": []string{""}}, "groups[0]")
	g.WantError(400, "POST", "/api/v1/consumers", map[string]any{"username": "c", "password": "x"}, "password", "unknown field")
	g.Must("POST", "/api/v1/consumers", map[string]any{"username": strings.Repeat("x", 128)})

	// PUT: full replacement; its own username and custom_id are not conflicts.
	put := g.Must("PUT", p("/api/v1/consumers/%d", id(bob)), map[string]any{"username": "bob", "custom_id": "b-1"})
	if !reflect.DeepEqual(put["groups"], []any{}) || put["created_at"] != bob["created_at"] {
		t.Fatalf("PUT: %v", put)
	}
	put = g.Must("PUT", p("/api/v1/consumers/%d", id(bob)), map[string]any{"username": "robert"})
	if put["custom_id"] != nil || put["username"] != "robert" {
		t.Fatalf("PUT: %v", put)
	}
	g.WantError(400, "PUT", p("/api/v1/consumers/%d", id(bob)), map[string]any{"username": "alice"}, "username", "taken")
	g.WantError(404, "PUT", "/api/v1/consumers/999", map[string]any{"username": "zed"})
	g.WantError(404, "GET", "/api/v1/consumers/999", nil)
	g.WantError(404, "DELETE", "/api/v1/consumers/999", nil)
	if got := g.Must("GET", p("/api/v1/consumers/%d", id(alice)), nil); !reflect.DeepEqual(got, alice) {
		t.Fatalf("GET %v, want %v", got, alice)
	}
	if l := g.List("/api/v1/consumers"); len(l) != 3 || id(l[0]) != id(alice) || id(l[1]) != id(bob) {
		t.Fatalf("list: %v", l)
	}

	// Deleting a consumer deletes its credentials.
	cred := g.Must("POST", p("/api/v1/consumers/%d/credentials", id(alice)), map[string]any{"type": "key-auth"})
	if got := g.Must("DELETE", p("/api/v1/consumers/%d", id(alice)), nil); !reflect.DeepEqual(got, map[string]any{"deleted": true}) {
		t.Fatalf("delete: %v", got)
	}
	if l := g.List(p("/api/v1/consumers/%d/credentials", id(alice))); len(l) != 0 {
		t.Fatalf("credentials left: %v", l)
	}
	g.WantError(404, "DELETE", p("/api/v1/credentials/%d", id(cred)), nil)
	var n struct{ Consumers, Credentials int }
	g.JSON("GET", "/api/v1/config", nil, &n)
	if n.Consumers != 2 || n.Credentials != 0 {
		t.Fatalf("config counts: %+v", n)
	}
	// The username is free again.
	g.Must("POST", "/api/v1/consumers", map[string]any{"username": "alice"})
}

var secretRe = regexp.MustCompile(`(?i)"(password|password_hash|secret)"|\$2[aby]\$|s3cr3t|hunter2`)

func TestCredentials(t *testing.T) {
	g := start(t)
	c := id(g.Must("POST", "/api/v1/consumers", map[string]any{"username": "alice"}))
	base := p("/api/v1/consumers/%d/credentials", c)
	create := func(body map[string]any) map[string]any {
		t.Helper()
		st, b := g.Do("POST", base, body)
		if st != 200 {
			t.Fatalf("POST %v: %d %s", body, st, b)
		}
		if secretRe.Match(b) {
			t.Fatalf("answer carries a secret: %s", b)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}

	// key-auth: a generated key is 32 random bytes in hex.
	k1 := create(map[string]any{"type": "key-auth"})
	if got := slices.Sorted(maps.Keys(k1)); !reflect.DeepEqual(got, []string{"consumer_id", "created_at", "id", "key", "type"}) {
		t.Fatalf("key-auth fields: %v", got)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(k1["key"].(string)) || k1["consumer_id"] != float64(c) || k1["type"] != "key-auth" {
		t.Fatalf("key-auth: %v", k1)
	}
	k2 := create(map[string]any{"type": "key-auth", "key": "alice-key"})
	if k2["key"] != "alice-key" {
		t.Fatalf("key-auth: %v", k2)
	}
	// basic-auth
	ba := create(map[string]any{"type": "basic-auth", "username": "alice", "password": "hunter2"})
	if got := slices.Sorted(maps.Keys(ba)); !reflect.DeepEqual(got, []string{"consumer_id", "created_at", "id", "type", "username"}) {
		t.Fatalf("basic-auth fields: %v", got)
	}
	// jwt: HS256 by default; public_key null.
	jh := create(map[string]any{"type": "jwt", "secret": "s3cr3t"})
	if got := slices.Sorted(maps.Keys(jh)); !reflect.DeepEqual(got, []string{"algorithm", "consumer_id", "created_at", "id", "key", "public_key", "type"}) {
		t.Fatalf("jwt fields: %v", got)
	}
	if jh["algorithm"] != "HS256" || jh["public_key"] != nil || len(jh["key"].(string)) != 64 {
		t.Fatalf("jwt: %v", jh)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pemPublic(t, &rsaKey.PublicKey)
	jr := create(map[string]any{"type": "jwt", "key": "issuer-rs", "algorithm": "RS256", "public_key": rsaPEM})
	if jr["algorithm"] != "RS256" || jr["public_key"] != rsaPEM || jr["key"] != "issuer-rs" {
		t.Fatalf("jwt RS256: %v", jr)
	}
	ec256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	create(map[string]any{"type": "jwt", "algorithm": "ES256", "public_key": pemPublic(t, &ec256.PublicKey)})
	create(map[string]any{"type": "jwt", "algorithm": "HS512", "secret": "s3cr3t", "key": "alice-key"}) // keys are unique per type

	// Validation.
	for _, cse := range []struct {
		body      map[string]any
		fragments []string
	}{
		{map[string]any{}, []string{"type", "required"}},
		{map[string]any{"type": "oauth2"}, []string{"type"}},
		{map[string]any{"type": "key-auth", "key": ""}, []string{"key"}},
		{map[string]any{"type": "key-auth", "key": "alice-key"}, []string{"key", "already used"}},
		{map[string]any{"type": "key-auth", "password": "hunter2"}, []string{"password", "does not apply"}},
		{map[string]any{"type": "key-auth", "extra": 1}, []string{"extra", "unknown field"}},
		{map[string]any{"type": "basic-auth", "password": "hunter2"}, []string{"username", "required"}},
		{map[string]any{"type": "basic-auth", "username": "bob"}, []string{"password", "required"}},
		{map[string]any{"type": "basic-auth", "username": "bob", "password": ""}, []string{"password"}},
		{map[string]any{"type": "basic-auth", "username": "b:ob", "password": "hunter2"}, []string{"username", "colon"}},
		{map[string]any{"type": "basic-auth", "username": "bob", "password": strings.Repeat("p", 73)}, []string{"password", "72"}},
		{map[string]any{"type": "basic-auth", "username": "alice", "password": "hunter2"}, []string{"username", "already used"}},
		{map[string]any{"type": "basic-auth", "username": "bob", "password": "hunter2", "key": "k"}, []string{"key", "does not apply"}},
		{map[string]any{"type": "jwt"}, []string{"secret", "required"}},
		{map[string]any{"type": "jwt", "algorithm": "HS384"}, []string{"secret", "required"}},
		{map[string]any{"type": "jwt", "algorithm": "none", "secret": "s3cr3t"}, []string{"algorithm"}},
		{map[string]any{"type": "jwt", "secret": "s3cr3t", "public_key": rsaPEM}, []string{"public_key", "does not apply"}},
		{map[string]any{"type": "jwt", "algorithm": "RS256"}, []string{"public_key", "required"}},
		{map[string]any{"type": "jwt", "algorithm": "RS256", "public_key": "not a key"}, []string{"public_key", "PEM"}},
		{map[string]any{"type": "jwt", "algorithm": "RS256", "public_key": pemPublic(t, &ec256.PublicKey)}, []string{"public_key", "RSA"}},
		{map[string]any{"type": "jwt", "algorithm": "ES256", "public_key": rsaPEM}, []string{"public_key", "ECDSA"}},
		{map[string]any{"type": "jwt", "algorithm": "ES256", "public_key": pemPublic(t, &ec384.PublicKey)}, []string{"public_key", "P-256"}},
		{map[string]any{"type": "jwt", "algorithm": "RS256", "public_key": rsaPEM, "secret": "s3cr3t"}, []string{"secret", "does not apply"}},
		{map[string]any{"type": "jwt", "key": "issuer-rs", "secret": "s3cr3t"}, []string{"key", "already used"}},
		{map[string]any{"type": "basic-auth", "username": "bob"}, []string{"password"}},
	} {
		st, b := g.Do("POST", base, cse.body)
		if secretRe.Match(b) {
			t.Fatalf("error answer carries a secret: %s", b)
		}
		if st != 400 {
			t.Fatalf("POST %v: %d %s", cse.body, st, b)
		}
		for _, f := range cse.fragments {
			if !strings.Contains(string(b), f) {
				t.Fatalf("POST %v: %s lacks %q", cse.body, b, f)
			}
		}
	}
	// Missing consumer: 400 on create, [] on list; not an id: 400.
	g.WantError(400, "POST", "/api/v1/consumers/999/credentials", map[string]any{"type": "key-auth"}, "consumer_id")
	g.WantError(400, "POST", "/api/v1/consumers/abc/credentials", map[string]any{"type": "key-auth"}, "consumer_id")
	g.WantError(400, "GET", "/api/v1/consumers/abc/credentials", nil, "consumer_id")
	if l := g.List("/api/v1/consumers/999/credentials"); len(l) != 0 {
		t.Fatalf("credentials of consumer 999: %v", l)
	}

	// The list is redacted and in id order.
	st, b := g.Do("GET", base, nil)
	if st != 200 || secretRe.Match(b) {
		t.Fatalf("list: %d %s", st, b)
	}
	l := g.List(base)
	if len(l) != 7 || id(l[0]) != id(k1) || id(l[2]) != id(ba) || l[3]["type"] != "jwt" {
		t.Fatalf("list: %v", l)
	}
	if !reflect.DeepEqual(l[0], k1) || !reflect.DeepEqual(l[4], jr) {
		t.Fatalf("list items differ from the create answers: %v", l)
	}

	// Delete.
	if got := g.Must("DELETE", p("/api/v1/credentials/%d", id(k2)), nil); !reflect.DeepEqual(got, map[string]any{"deleted": true}) {
		t.Fatalf("delete: %v", got)
	}
	g.WantError(404, "DELETE", p("/api/v1/credentials/%d", id(k2)), nil)
	g.WantError(400, "DELETE", "/api/v1/credentials/abc", nil, "id: ")
	// The key is free again.
	create(map[string]any{"type": "key-auth", "key": "alice-key"})
}
