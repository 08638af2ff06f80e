package auth_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestSignInDuringPasswordReset, on SQLite and on PostgreSQL: a sign-in
// with the old password racing an admin's password reset or the user's
// deletion leaves no session, and answers 200 or 401. The sign-in read the
// account, checked the password (a slow hash) and then created its
// session: a reset committed meanwhile had already ended the user's
// sessions, so the old password's session stayed valid, and a deletion
// made the session's insert fail its foreign key, answered 400.
func TestSignInDuringPasswordReset(t *testing.T) { testgw.EachStore(t, signInDuringReset) }

func signInDuringReset(t *testing.T, g *testgw.Gateway) {
	e := &env{t: t, g: g}
	adm := e.withToken(e.anon().token())
	// Each round's sign-in comes from its own client address, so the
	// failed sign-ins of the rounds the reset won stay under the limit.
	settings := adm.want(200, "GET", "/api/v1/settings", nil).m(t)
	delete(settings, "updated_at")
	settings["trusted_proxies"] = []string{"127.0.0.1"}
	adm.want(200, "PUT", "/api/v1/settings", settings)
	kept := []string{}
	for round := 0; round < 40; round++ {
		email := fmt.Sprintf("u%d@example.com", round)
		id := adm.user(email, "editor", "old-password")
		reset := round%2 == 0
		u := e.browser()
		var wg sync.WaitGroup
		var signIn, change answer
		wg.Add(2)
		go func() {
			defer wg.Done()
			signIn = u.do("POST", "/api/v1/auth/login", map[string]string{"email": email, "password": "old-password"},
				"X-Forwarded-For", fmt.Sprintf("192.0.2.%d", round+1))
		}()
		go func() {
			defer wg.Done()
			// sweeps the change across the sign-in's password check
			time.Sleep(time.Duration(round/2%10) * 2 * time.Millisecond)
			if reset {
				change = adm.do("PUT", fmt.Sprintf("/api/v1/users/%d", id), map[string]any{"email": email, "role": "editor", "password": "new-password"})
			} else {
				change = adm.do("DELETE", fmt.Sprintf("/api/v1/users/%d", id), nil)
			}
		}()
		wg.Wait()
		if change.Status != 200 {
			t.Fatalf("round %d: the reset or deletion answered %d: %s", round, change.Status, change.Body)
		}
		if signIn.Status != 200 && signIn.Status != 401 {
			t.Fatalf("round %d (reset %v): the sign-in answered %d, want 200 or 401: %s", round, reset, signIn.Status, signIn.Body)
		}
		if signIn.Status == 200 {
			if st := u.do("GET", "/api/v1/auth/me", nil).Status; st != 401 {
				kept = append(kept, fmt.Sprintf("round %d (reset %v): %d", round, reset, st))
			}
		}
	}
	if len(kept) > 0 {
		t.Fatalf("sessions signed in with a password reset (or of a user deleted) meanwhile still work: %v", kept)
	}
}

// TestOwnPasswordChangeDuringReset: a user's change of their own password
// racing an admin's reset of it never wins over the reset: either it
// committed first and the reset replaced it, or the reset ended the
// user's session and the change answers 401. The change checked the
// current password and then wrote the new one unconditionally, over the
// admin's.
func TestOwnPasswordChangeDuringReset(t *testing.T) {
	e := start(t)
	adm := e.withToken(e.anon().token())
	for round := 0; round < 30; round++ {
		email := fmt.Sprintf("u%d@example.com", round)
		id := adm.user(email, "editor", "old-password")
		u := e.browser()
		u.login(email, "old-password")
		var wg sync.WaitGroup
		var own, reset answer
		wg.Add(2)
		go func() {
			defer wg.Done()
			own = u.do("PUT", "/api/v1/auth/me/password", map[string]string{"current_password": "old-password", "new_password": "users-password"})
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(round%10) * 2 * time.Millisecond)
			reset = adm.do("PUT", fmt.Sprintf("/api/v1/users/%d", id), map[string]any{"email": email, "role": "editor", "password": "admins-password"})
		}()
		wg.Wait()
		if reset.Status != 200 || (own.Status != 200 && own.Status != 401) {
			t.Fatalf("round %d: the reset answered %d, the user's change %d (want 200, and 200 or 401): %s", round, reset.Status, own.Status, own.Body)
		}
		if st := e.browser().do("POST", "/api/v1/auth/login", map[string]string{"email": email, "password": "admins-password"}).Status; st != 200 {
			t.Fatalf("round %d: signing in with the password the admin set answers %d (the user's change answered %d and won)", round, st, own.Status)
		}
	}
}
