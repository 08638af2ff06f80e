package dashboard_test

import (
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestBrowserSignOutFailureKeepsSignedIn: the session cookie is HttpOnly,
// so only the server's logout ends the session. When the logout is refused
// or fails (here answered 503, as when the database is unreachable, or
// 403 by the CSRF check behind a proxy that changes Host), the session is
// still valid: the page must not show the sign-in form with "Signed out."
// (someone leaving a shared computer would believe it) but say that the
// sign-out failed. A logout that succeeds returns to the sign-in form.
func TestBrowserSignOutFailureKeepsSignedIn(t *testing.T) {
	bin := chromium(t)
	g := testgw.Start(t, nil)
	g.Must("POST", "/api/v1/users", map[string]any{"email": "ada@example.test", "name": "Ada", "role": "admin", "password": "admin-pass-1"})
	ctx := browser(t, bin)
	step := stepper(t, ctx)

	step("sign in",
		chromedp.Navigate(g.AdminURL+"/"),
		chromedp.WaitVisible(`#login-form`, chromedp.ByQuery),
		typeInto(`#login-form`, "email", "ada@example.test", "password", "admin-pass-1"),
		chromedp.Click(`#login-form button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#config-cards`, chromedp.ByQuery),
	)
	// The logout request fails at the server; every other one goes through.
	const failLogout = `window.__fetch = window.fetch; window.fetch = (u, o) => String(u).includes('/api/v1/auth/logout')
		? Promise.resolve(new Response('{"error":"the database is unreachable: nothing was changed; try again later"}', { status: 503, headers: { 'Content-Type': 'application/json' } }))
		: window.__fetch(u, o);`
	var signInShown bool
	var meStatus int
	step("a failed sign-out",
		chromedp.Evaluate(failLogout, nil),
		chromedp.Click(`#signout`, chromedp.ByQuery),
		chromedp.WaitVisible(`#signout-error, #login-form`, chromedp.ByQuery),
		chromedp.Evaluate(`!!document.getElementById('login-form')`, &signInShown),
		chromedp.Evaluate(`window.__fetch('/api/v1/auth/me').then(r => r.status)`, &meStatus, awaitPromise),
	)
	if meStatus != 200 {
		t.Fatalf("the session should still be valid after the failed logout: GET /api/v1/auth/me %d", meStatus)
	}
	if signInShown {
		t.Fatal("the page shows the sign-in form (\"Signed out.\") while the session is still valid")
	}
	var msg string
	step("the failure is said", chromedp.Text(`#signout-error`, &msg, chromedp.ByQuery))
	if msg == "" {
		t.Error("no sign-out error shown")
	}
	step("a sign-out that succeeds",
		chromedp.Evaluate(`window.fetch = window.__fetch`, nil),
		chromedp.Click(`#signout`, chromedp.ByQuery),
		chromedp.WaitVisible(`#login-form`, chromedp.ByQuery),
		chromedp.Evaluate(`fetch('/api/v1/auth/me').then(r => r.status)`, &meStatus, awaitPromise),
	)
	if meStatus != 401 {
		t.Errorf("after sign-out GET /api/v1/auth/me answers %d, want 401", meStatus)
	}
}

// awaitPromise makes chromedp.Evaluate wait for the promise the expression
// gives and read its value.
func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }
