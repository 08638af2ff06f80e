package dashboard_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-gateway/gateway/app/dashboard"
	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/reqtest"
	"github.com/caddy-gateway/gateway/modules/plugins"
)

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, b := reqtest.Do(t, http.DefaultClient, reqtest.New(t, "GET", url, nil))
	return resp, string(b)
}

var externalURL = regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)

// TestServesPageAndAssets: GET / is the HTML page, its files are served with
// their content types, nothing refers to another host, other paths keep
// the API's 404.
func TestServesPageAndAssets(t *testing.T) {
	g := testgw.Start(t, nil)
	resp, page := get(t, g.AdminURL+"/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(page, "<!doctype html>") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("GET / is not the dashboard page: %.200s", page)
	}
	if m := externalURL.FindString(page); m != "" {
		t.Errorf("the page refers to another host: %s", m)
	}
	for name, ct := range dashboard.Assets {
		if !strings.Contains(page, dashboard.AssetPrefix+name) {
			t.Errorf("the page does not load %s", name)
		}
		resp, body := get(t, g.AdminURL+dashboard.AssetPrefix+name)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ct {
			t.Errorf("%s: %d %q, want 200 %q", name, resp.StatusCode, resp.Header.Get("Content-Type"), ct)
		}
		if len(body) < 100 {
			t.Errorf("%s: %d bytes", name, len(body))
		}
		// The SVG namespace name is an identifier, never fetched.
		if m := externalURL.FindString(strings.ReplaceAll(body, `'http://www.w3.org/2000/svg'`, "")); m != "" {
			t.Errorf("%s refers to another host: %s", name, m)
		}
	}
	for _, p := range []string{"/nope", "/dashboard/assets/missing.js", "/dashboard/"} {
		resp, body := get(t, g.AdminURL+p)
		if resp.StatusCode != 404 || !strings.Contains(body, "no such endpoint") {
			t.Errorf("GET %s: %d %s, want the API's 404", p, resp.StatusCode, body)
		}
	}
	// The endpoints are in the generated OpenAPI document.
	_, doc := get(t, g.AdminURL+"/openapi.yaml")
	for _, p := range []string{"\n    /:\n", dashboard.AssetPrefix + "app.js"} {
		if !strings.Contains(doc, p) {
			t.Errorf("openapi.yaml does not document %q", strings.TrimSpace(p))
		}
	}
}

// chromium finds the browser of the browser tests (skipped in -short
// mode; on CI a missing one fails them).
func chromium(t *testing.T) string {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium): the dashboard browser test cannot run on CI")
	}
	t.Skip("chromium is not installed: skipping the browser test")
	return ""
}

// TestBrowser drives the dashboard in headless Chromium: open mode goes
// straight to the overview, a service and a route are created through the
// forms, a proxied request shows up in the live log (event stream), and
// the router dry run finds the route.
func TestBrowser(t *testing.T) {
	bin := chromium(t)
	upstream := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream saw %s", r.URL.Path)
	})
	upHost, upPort, _ := strings.Cut(strings.TrimPrefix(upstream.URL, "http://"), ":")

	g := testgw.Start(t, nil)
	ctx := browser(t, bin)
	step := stepper(t, ctx)

	var who, version string
	step("overview in open mode",
		chromedp.Navigate(g.AdminURL+"/"),
		chromedp.WaitVisible(`#config-cards`, chromedp.ByQuery),
		chromedp.Text(`#whoami`, &who, chromedp.ByQuery),
		chromedp.Text(`#view-overview h3:nth-of-type(2)`, &version, chromedp.ByQuery),
	)
	if !strings.Contains(who, "open mode") || !strings.Contains(who, "admin") {
		t.Errorf("who am I: %q", who)
	}
	if !strings.Contains(version, "Configuration · version") {
		t.Errorf("overview: %q", version)
	}

	step("create a service",
		openNew(g, "services", `#services-table`, "service"),
		typeInto(`#service-form`, "name", "ui-svc"),
		chromedp.Click(`#service-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="services-table"]//strong[text()="ui-svc"]`, chromedp.BySearch),
		chromedp.Click(`//table[@id="services-table"]//tr[.//strong[text()="ui-svc"]]//button[text()="Targets"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#target-form`, chromedp.ByQuery),
		typeInto(`#target-form`, "host", upHost, "port", upPort),
		chromedp.Click(`#target-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="targets-table"]//td[text()="`+upHost+`"]`, chromedp.BySearch),
	)

	// An error of the API is shown next to the form.
	var formErr string
	step("a rejected route shows the API error",
		openNew(g, "routes", `#routes-table`, "route"),
		typeInto(`#route-form`, "name", "ui-route", "paths", "~("),
		chromedp.Click(`#route-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#route-form .err:not(:empty)`, chromedp.ByQuery),
		chromedp.Text(`#route-form .err`, &formErr, chromedp.ByQuery),
	)
	if formErr == "" {
		t.Error("no error shown for an invalid route")
	}
	step("create a route",
		chromedp.SetValue(`#route-form input[name=paths]`, "/ui", chromedp.ByQuery),
		chromedp.Click(`#route-form input[name=strip_path]`, chromedp.ByQuery),
		chromedp.Click(`#route-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="routes-table"]//strong[text()="ui-route"]`, chromedp.BySearch),
	)
	var routes []map[string]any
	if st := g.JSON("GET", "/api/v1/routes", nil, &routes); st != 200 || len(routes) != 1 || routes[0]["strip_path"] != true {
		t.Fatalf("routes after the UI created one: %d %v", st, routes)
	}

	step("open the live log",
		screen(g, "log", `#live-state.live`),
	)
	st, body, _ := g.Get("", "/ui/hello-from-test")
	if st != 200 || body != "upstream saw /hello-from-test" {
		t.Fatalf("proxied request: %d %q", st, body)
	}
	var row string
	step("the proxied request appears in the live log",
		chromedp.WaitVisible(`//tbody[@id="log-rows"]//td[text()="/ui/hello-from-test"]`, chromedp.BySearch),
		chromedp.Text(`#log-rows tr`, &row, chromedp.ByQuery),
	)
	if !strings.Contains(row, "200") || !strings.Contains(row, upstream.Listener.Addr().String()) {
		t.Errorf("log row: %q", row)
	}

	var result string
	step("router dry run",
		screen(g, "router", `#router-form`),
		chromedp.SetValue(`#router-form input[name=path]`, "/ui/x", chromedp.ByQuery),
		chromedp.Click(`#router-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#router-result .ok`, chromedp.ByQuery),
		chromedp.Text(`#router-result .ok`, &result, chromedp.ByQuery),
	)
	if !strings.Contains(result, "ui-route") {
		t.Errorf("router test: %q", result)
	}

	step("create a plugin and a consumer with a credential",
		openNew(g, "plugins", `#plugins-table`, "plugin"),
		chromedp.SetValue(`#plugin-form select[name=type]`, "rate-limit", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#plugin-form select[name=type]').dispatchEvent(new Event('change'))`, nil),
		chromedp.SetValue(`#plugin-form input[name="config.limit"]`, "1000", chromedp.ByQuery),
		chromedp.Click(`#plugin-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="plugins-table"]//strong[text()="rate-limit"]`, chromedp.BySearch),
		openNew(g, "consumers", `#consumers-table`, "consumer"),
		typeInto(`#consumer-form`, "username", "alice"),
		chromedp.Click(`#consumer-form button[type=submit]`, chromedp.ByQuery),
		chromedp.Click(`//table[@id="consumers-table"]//tr[.//strong[text()="alice"]]//button[text()="Credentials"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#credential-form`, chromedp.ByQuery),
		typeInto(`#credential-form`, "key", "alice-key"),
		chromedp.Click(`#credential-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="credentials-table"]//td[text()="alice-key"]`, chromedp.BySearch),
		chromedp.Navigate(g.AdminURL+"/#plugins"),
		chromedp.WaitVisible(`//table[@id="plugins-table"]//strong[text()="rate-limit"]`, chromedp.BySearch),
	)
	shot(t, ctx, "plugins")

	var total, nodes string
	step("the overview counts the request and lists the node",
		screen(g, "overview", `#health`),
		chromedp.Text(`#traffic-cards .card .v`, &total, chromedp.ByQuery),
		chromedp.Text(`#nodes`, &nodes, chromedp.ByQuery),
	)
	if total == "0" || total == "" {
		t.Errorf("overview requests: %q", total)
	}
	if !strings.Contains(nodes, "(this node)") || !strings.Contains(nodes, "current") {
		t.Errorf("overview nodes: %q", nodes)
	}
	shot(t, ctx, "overview")
	step("back to the live log for the screenshot",
		chromedp.Navigate(g.AdminURL+"/#log"),
		chromedp.WaitVisible(`//tbody[@id="log-rows"]//td[text()="/ui/hello-from-test"]`, chromedp.BySearch),
	)
	shot(t, ctx, "log")
}

// shot writes a full-page screenshot named name.png into the tests'
// artifacts directory: $ARTIFACTS_DIR, or a directory under the system's
// temporary directory (printed in the log), never the repository.
func shot(t *testing.T, ctx context.Context, name string) {
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	path := filepath.Join(artifactsDir(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

func artifactsDir(t *testing.T) string {
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "gateway-dashboard-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("artifacts directory: %v", err)
	}
	return dir
}

// browser starts headless Chromium for the test.
func browser(t *testing.T, bin string) context.Context {
	// Not t.TempDir: Chromium may still write its profile for a moment
	// after it is stopped, which would fail the test at cleanup.
	dir, err := os.MkdirTemp("", "dashboard-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 20 && os.RemoveAll(dir) != nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
	})
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(dir),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	return ctx
}

// screen opens the dashboard's screen #hash and waits until the element
// sel shows.
func screen(g *testgw.Gateway, hash, sel string) chromedp.Action {
	return chromedp.Tasks{chromedp.Navigate(g.AdminURL + "/#" + hash), chromedp.WaitVisible(sel, chromedp.ByQuery)}
}

// clickButton clicks the button labelled text.
func clickButton(text string) chromedp.Action {
	return chromedp.Click(`//button[text()="`+text+`"]`, chromedp.BySearch)
}

// typeInto types into the inputs of the form sel: name, value pairs, in
// order.
func typeInto(sel string, fields ...string) chromedp.Action {
	var typing chromedp.Tasks
	for i := 0; i+1 < len(fields); i += 2 {
		typing = append(typing, chromedp.SendKeys(sel+" input[name="+fields[i]+"]", fields[i+1], chromedp.ByQuery))
	}
	return typing
}

// openNew shows the view at hash (once sel is visible) and opens its
// "New <thing>" form.
func openNew(g *testgw.Gateway, hash, sel, thing string) chromedp.Action {
	return chromedp.Tasks{screen(g, hash, sel), clickButton("New " + thing)}
}

// stepper runs named browser steps, failing the test with a screenshot.
func stepper(t *testing.T, ctx context.Context) func(string, ...chromedp.Action) {
	return func(name string, actions ...chromedp.Action) {
		t.Helper()
		start := time.Now()
		if err := chromedp.Run(ctx, actions...); err != nil {
			shot(t, ctx, "failed-"+strings.ReplaceAll(t.Name(), "/", "-"))
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
	}
}

// TestBrowserSignIn: with authentication enabled the page asks to sign in;
// an SSO failure is shown; a wrong password shows the API's error; a
// viewer sees no mutation buttons; sign-out returns to the form; the admin
// token works and feeds the live log through ?access_token=.
func TestBrowserSignIn(t *testing.T) {
	bin := chromium(t)
	g := testgw.Start(t, nil)
	tok := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	g.Header.Set("Authorization", "Bearer "+tok)
	g.Must("POST", "/api/v1/users", map[string]any{"email": "vera@example.test", "name": "Vera", "role": "viewer", "password": "viewer-pass-1"})
	g.Service("listed-svc")
	ctx := browser(t, bin)
	step := stepper(t, ctx)

	var msg string
	// A link anyone can send: the page shows reason codes only, not a
	// sentence of the sender's on the trusted sign-in page.
	step("a chosen sentence in sso_error is not shown",
		chromedp.Navigate(g.AdminURL+"/?sso_error="+url.QueryEscape("The gateway moved: sign in at https://evil.example")),
		chromedp.WaitVisible(`#login-form`, chromedp.ByQuery),
		chromedp.Text(`.login .err`, &msg, chromedp.ByQuery),
	)
	if msg != "Single sign-on failed: unknown reason" {
		t.Errorf("sso error with a sentence: %q", msg)
	}
	step("an SSO failure is shown on the sign-in form",
		chromedp.Navigate(g.AdminURL+"/?sso_error=state_mismatch"),
		chromedp.WaitVisible(`#login-form`, chromedp.ByQuery),
		chromedp.Text(`.login .err`, &msg, chromedp.ByQuery),
	)
	if !strings.Contains(msg, "state_mismatch") {
		t.Errorf("sso error: %q", msg)
	}
	step("a wrong password shows the API error",
		typeInto(`#login-form`, "email", "vera@example.test", "password", "wrong-password"),
		chromedp.Click(`#login-form button`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('.login .err').textContent !== '' && !document.querySelector('.login .err').textContent.includes('state_mismatch')`, nil),
		chromedp.Text(`.login .err`, &msg, chromedp.ByQuery),
	)
	t.Logf("wrong password: %q", msg)
	var who string
	var newButtons int
	step("a viewer signs in and sees no mutation buttons",
		chromedp.SetValue(`#login-form input[name=password]`, "viewer-pass-1", chromedp.ByQuery),
		chromedp.Click(`#login-form button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#config-cards`, chromedp.ByQuery),
		chromedp.Text(`#whoami`, &who, chromedp.ByQuery),
		chromedp.Navigate(g.AdminURL+"/#services"),
		chromedp.WaitVisible(`//table[@id="services-table"]//strong[text()="listed-svc"]`, chromedp.BySearch),
		chromedp.Evaluate(`[...document.querySelectorAll('button.mut')].filter(b => b.offsetParent !== null).length`, &newButtons),
	)
	if who != "Vera · viewer" {
		t.Errorf("who: %q", who)
	}
	if newButtons != 0 {
		t.Errorf("a viewer sees %d mutation buttons", newButtons)
	}
	// The screens of stream routes, certificates, settings, users and
	// backup show a viewer no mutation button, no editable setting and no
	// Users entry.
	for _, v := range []struct{ hash, ready string }{
		{"streams", `#stream-routes-table`}, {"certificates", `#certs-table`}, {"settings", `#settings-form`},
		{"backup", `#export-link`}, {"users", `#view-users p`}, {"account", `#password-form`},
	} {
		var visible, editable int
		var usersLink bool
		step("a viewer on #"+v.hash,
			screen(g, v.hash, v.ready),
			chromedp.Evaluate(`[...document.querySelectorAll('button.mut, form.mut, .adm')].filter(b => b.offsetParent !== null).length`, &visible),
			chromedp.Evaluate(`[...document.querySelectorAll('#settings-form input')].filter(i => !i.disabled).length`, &editable),
			chromedp.Evaluate(`document.querySelector('nav a[href="#users"]').offsetParent !== null`, &usersLink),
		)
		if visible != 0 || editable != 0 || usersLink {
			t.Errorf("#%s: a viewer sees %d mutation controls, %d editable settings, users link %v", v.hash, visible, editable, usersLink)
		}
	}
	step("sign out",
		chromedp.Click(`#signout`, chromedp.ByQuery),
		chromedp.WaitVisible(`#login-form`, chromedp.ByQuery),
		chromedp.Navigate(g.AdminURL+"/"),
		chromedp.WaitVisible(`#login-form`, chromedp.ByQuery),
	)
	step("the admin token signs in and feeds the live log",
		typeInto(`#token-form`, "token", tok),
		chromedp.Click(`#token-form button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#config-cards`, chromedp.ByQuery),
		chromedp.Text(`#whoami`, &who, chromedp.ByQuery),
		screen(g, "log", `#live-state.live`),
	)
	if who != "admin token · admin" {
		t.Errorf("who: %q", who)
	}
	g.Get("", "/not-routed-from-signin-test")
	step("the event reaches the page",
		chromedp.WaitVisible(`//tbody[@id="log-rows"]//td[text()="/not-routed-from-signin-test"]`, chromedp.BySearch),
	)
}

// TestBrowserAdminScreens: in open mode (admin) a stream route is created
// and the restart note shown, the settings are saved (all fields sent), a
// certificate and backup screen load, and the first user is created, which
// turns authentication on: the page asks to sign in, the new admin signs in,
// sees the users and the admin token panel, and changes their password.
func TestBrowserAdminScreens(t *testing.T) {
	bin := chromium(t)
	g := testgw.Start(t, nil)
	svc := g.Service("tcp-svc")
	var before map[string]any
	g.JSON("GET", "/api/v1/settings", nil, &before)
	ctx := browser(t, bin)
	step := stepper(t, ctx)

	var note string
	step("create a stream route and see the note",
		openNew(g, "streams", `#stream-routes-table`, "stream route"),
		typeInto(`#stream-form`, "name", "pg", "listen_addr", "127.0.0.1:15432"),
		chromedp.Click(`#stream-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="stream-routes-table"]//strong[text()="pg"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#stream-note`, chromedp.ByQuery),
		chromedp.Text(`#stream-note`, &note, chromedp.ByQuery),
	)
	if !strings.Contains(note, "listener changes take effect on restart") {
		t.Errorf("stream route note: %q", note)
	}
	var srs []map[string]any
	if st := g.JSON("GET", "/api/v1/stream-routes", nil, &srs); st != 200 || len(srs) != 1 || srs[0]["listen_addr"] != "127.0.0.1:15432" || srs[0]["service_id"] != float64(svc) {
		t.Fatalf("stream routes after the UI created one: %d %v", st, srs)
	}
	shot(t, ctx, "streams")

	var saved string
	step("save the settings",
		screen(g, "settings", `#settings-form`),
		chromedp.SetValue(`#settings-form input[name=trusted_proxies]`, "10.0.0.0/8, 192.0.2.7", chromedp.ByQuery),
		chromedp.SetValue(`#settings-form input[name=acme_email]`, "ops@example.test", chromedp.ByQuery),
		chromedp.Click(`#settings-form button[type=submit]`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('#settings-saved') && document.querySelector('#settings-saved').textContent !== ''`, nil),
		chromedp.Text(`#settings-saved`, &saved, chromedp.ByQuery),
	)
	shot(t, ctx, "settings")
	var after map[string]any
	g.JSON("GET", "/api/v1/settings", nil, &after)
	if fmt.Sprint(after["trusted_proxies"]) != "[10.0.0.0/8 192.0.2.7]" || after["acme_email"] != "ops@example.test" ||
		after["http_listen"] != before["http_listen"] || after["https_listen"] != before["https_listen"] || after["acme_directory_url"] != before["acme_directory_url"] ||
		after["allow_link_local_destinations"] != false {
		t.Errorf("settings after the UI saved them: %v (before %v)", after, before)
	}

	step("certificates screen",
		openNew(g, "certificates", `#certs-table`, "certificate"),
		chromedp.WaitVisible(`#cert-form textarea[name=key]`, chromedp.ByQuery),
		chromedp.WaitNotVisible(`#cert-form input[name=domains]`, chromedp.ByQuery),
	)
	shot(t, ctx, "certs")
	step("backup screen",
		screen(g, "backup", `#export-link`),
		chromedp.WaitVisible(`#import-form`, chromedp.ByQuery),
	)
	st, doc := g.Do("GET", "/api/v1/export", nil)
	file := t.TempDir() + "/export.json"
	if err := os.WriteFile(file, doc, 0o644); st != 200 || err != nil {
		t.Fatalf("export: %d %v", st, err)
	}
	var report string
	step("import the export through the form and see the report",
		chromedp.Evaluate(`window.confirm = () => true`, nil),
		chromedp.SetUploadFiles(`#import-form input[name=file]`, []string{file}, chromedp.ByQuery),
		chromedp.Click(`#import-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#import-report .ok`, chromedp.ByQuery),
		chromedp.Text(`#import-report`, &report, chromedp.ByQuery),
	)
	if !strings.Contains(report, "Imported export.json") || !strings.Contains(strings.ToLower(report), "stream routes") {
		t.Errorf("import report: %q", report)
	}
	if g.JSON("GET", "/api/v1/stream-routes", nil, &srs); len(srs) != 1 || srs[0]["name"] != "pg" {
		t.Errorf("stream routes after the import: %v", srs)
	}

	var msg string
	step("create the first user: authentication turns on",
		screen(g, "users", `#users-table`),
		chromedp.WaitVisible(`#token-panel button`, chromedp.ByQuery),
		clickButton("New user"),
		typeInto(`#user-form`, "email", "ada@example.test", "name", "Ada"),
		chromedp.SetValue(`#user-form select[name=role]`, "admin", chromedp.ByQuery),
		typeInto(`#user-form`, "password", "ada-pass-123"),
		chromedp.Click(`#user-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#login-form`, chromedp.ByQuery),
		chromedp.Text(`.login .err`, &msg, chromedp.ByQuery),
	)
	if !strings.Contains(msg, "sign in") {
		t.Errorf("after the first user: %q", msg)
	}
	var who string
	step("the new admin signs in and sees the users",
		typeInto(`#login-form`, "email", "ada@example.test", "password", "ada-pass-123"),
		chromedp.Click(`#login-form button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#whoami`, chromedp.ByQuery),
		chromedp.Text(`#whoami`, &who, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="users-table"]//strong[text()="ada@example.test"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#sso-form`, chromedp.ByQuery),
	)
	if who != "Ada · admin" {
		t.Errorf("who: %q", who)
	}
	var token string
	step("generate the admin token: shown once",
		chromedp.Click(`//div[@id="token-panel"]//button[text()="Generate token"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#new-token-value`, chromedp.ByQuery),
		chromedp.Text(`#new-token-value`, &token, chromedp.ByQuery),
	)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(token) {
		t.Errorf("new admin token: %q", token)
	}
	shot(t, ctx, "users")
	var changed string
	step("change the own password",
		chromedp.Click(`#account-link`, chromedp.ByQuery),
		chromedp.WaitVisible(`#password-form`, chromedp.ByQuery),
		typeInto(`#password-form`, "current_password", "ada-pass-123", "new_password", "ada-pass-456", "repeat", "ada-pass-456"),
		chromedp.Click(`#password-form button`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('#password-saved').textContent !== ''`, nil),
		chromedp.Text(`#password-saved`, &changed, chromedp.ByQuery),
	)
	if !strings.Contains(changed, "Password changed") {
		t.Errorf("password change: %q", changed)
	}
	resp, err := http.Post(g.AdminURL+"/api/v1/auth/login", "application/json", strings.NewReader(`{"email":"ada@example.test","password":"ada-pass-456"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("sign-in with the new password: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
}

// TestBrowserWasmModules: the WASM modules page lists modules with their
// size, sha256 and the plugins using them; a module is uploaded from WAT
// text and from a .wasm file; deleting a module in use shows the API's
// refusal naming the plugin; deleting an unused one removes its row. The
// plugin form offers exactly the plugin types the server registers.
func TestBrowserWasmModules(t *testing.T) {
	bin := chromium(t)
	g := testgw.Start(t, nil)
	wasmFile, err := filepath.Abs("../tests/testdata/wasm/as-filter/as-filter.wasm")
	if err != nil {
		t.Fatal(err)
	}
	wasmBytes, err := os.ReadFile(wasmFile)
	if err != nil {
		t.Fatal(err)
	}
	svc := g.Service("wasm-svc")
	route := g.Route("wasm-route", svc, map[string]any{"paths": []string{"/w"}})
	g.Must("POST", "/api/v1/wasm-modules", map[string]any{"name": "filter", "wasm_base64": base64.StdEncoding.EncodeToString(wasmBytes)})
	plugin := testgw.ID(g.Must("POST", "/api/v1/plugins", map[string]any{"type": "wasm", "scope": "route", "route_id": route,
		"config": map[string]any{"module": "filter", "config": "from-test"}}))

	ctx := browser(t, bin)
	step := stepper(t, ctx)
	var usedBy string
	step("the list shows the module and its plugin",
		chromedp.Navigate(g.AdminURL+"/#wasm"),
		chromedp.WaitVisible(`//table[@id="wasm-table"]//strong[text()="filter"]`, chromedp.BySearch),
		chromedp.Text(`//table[@id="wasm-table"]//tr[.//strong[text()="filter"]]/td[5]`, &usedBy, chromedp.BySearch),
	)
	if want := fmt.Sprintf("plugin #%d", plugin); !strings.Contains(usedBy, want) {
		t.Errorf("used by: %q, want %q", usedBy, want)
	}

	step("upload WAT text",
		clickButton("New module"),
		chromedp.WaitVisible(`#wasm-form`, chromedp.ByQuery),
		typeInto(`#wasm-form`, "name", "from-wat"),
		chromedp.SetValue(`#wasm-form select[name=source]`, "wat", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#wasm-form select[name=source]').dispatchEvent(new Event('change'))`, nil),
		chromedp.WaitVisible(`#wasm-form textarea[name=wat]`, chromedp.ByQuery),
		chromedp.SetValue(`#wasm-form textarea[name=wat]`, testgw.MinimalWAT, chromedp.ByQuery),
		chromedp.Click(`#wasm-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="wasm-table"]//strong[text()="from-wat"]`, chromedp.BySearch),
	)
	var formErr string
	step("an invalid WAT shows the assembler's error",
		clickButton("New module"),
		typeInto(`#wasm-form`, "name", "broken"),
		chromedp.SetValue(`#wasm-form select[name=source]`, "wat", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#wasm-form select[name=source]').dispatchEvent(new Event('change'))`, nil),
		chromedp.SetValue(`#wasm-form textarea[name=wat]`, "(module\n  (func (bogus)))", chromedp.ByQuery),
		chromedp.Click(`#wasm-form button[type=submit]`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('#wasm-form .err').textContent !== ''`, nil),
		chromedp.Text(`#wasm-form .err`, &formErr, chromedp.ByQuery),
	)
	if !strings.Contains(formErr, "wat") {
		t.Errorf("invalid WAT error: %q", formErr)
	}
	step("upload a .wasm file",
		chromedp.SetValue(`#wasm-form input[name=name]`, "from-file", chromedp.ByQuery),
		chromedp.SetValue(`#wasm-form select[name=source]`, "file", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#wasm-form select[name=source]').dispatchEvent(new Event('change'))`, nil),
		chromedp.SetUploadFiles(`#wasm-form input[name=file]`, []string{wasmFile}, chromedp.ByQuery),
		chromedp.Click(`#wasm-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="wasm-table"]//strong[text()="from-file"]`, chromedp.BySearch),
	)
	var mods []map[string]any
	g.JSON("GET", "/api/v1/wasm-modules", nil, &mods)
	if len(mods) != 3 || mods[2]["name"] != "from-file" || mods[2]["sha256"] != mods[0]["sha256"] || mods[2]["size_bytes"] != float64(len(wasmBytes)) {
		t.Fatalf("modules after the uploads: %v", mods)
	}
	shot(t, ctx, "wasm")

	var refused string
	step("deleting a module in use shows the plugins that use it",
		chromedp.Evaluate(`window.confirm = () => true`, nil),
		chromedp.Click(`//table[@id="wasm-table"]//tr[.//strong[text()="filter"]]//button[text()="Delete"]`, chromedp.BySearch),
		chromedp.Poll(`document.querySelector('#wasm-error').textContent !== ''`, nil),
		chromedp.Text(`#wasm-error`, &refused, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="wasm-table"]//strong[text()="filter"]`, chromedp.BySearch),
	)
	if want := fmt.Sprintf(`module "filter" is referenced by plugin %d`, plugin); !strings.Contains(refused, want) {
		t.Errorf("refused delete: %q, want %q", refused, want)
	}
	step("deleting an unused module",
		chromedp.Click(`//table[@id="wasm-table"]//tr[.//strong[text()="from-wat"]]//button[text()="Delete"]`, chromedp.BySearch),
		chromedp.WaitNotPresent(`//table[@id="wasm-table"]//strong[text()="from-wat"]`, chromedp.BySearch),
	)

	var offered []string
	step("the plugin form offers the registered types",
		openNew(g, "plugins", `#plugins-table`, "plugin"),
		chromedp.WaitVisible(`#plugin-form`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('#plugin-form select[name=type] option')].map(o => o.value).filter(v => v)`, &offered),
	)
	var want []string
	for _, typ := range plugins.Types() {
		want = append(want, typ.Name)
	}
	sort.Strings(want)
	if strings.Join(offered, ",") != strings.Join(want, ",") {
		t.Errorf("plugin types offered: %v, want the registered %v", offered, want)
	}
}

// The routes screen shows a page of 100 routes at a time with the count
// of all (a gateway may hold tens of thousands), and a link to a route on
// another page still shows and selects it.
func TestBrowserRoutesPaged(t *testing.T) {
	bin := chromium(t)
	g := testgw.Start(t, nil)
	svc := g.Service("paged")
	var last int64
	for i := range 101 {
		last = g.Route(fmt.Sprintf("paged-%03d", i), svc, testgw.Paths(fmt.Sprintf("/p%d", i)))
	}
	ctx := browser(t, bin)
	step := stepper(t, ctx)
	var rows int
	var count string
	step("the first page",
		screen(g, "routes", `#routes-table`),
		chromedp.Evaluate(`document.querySelectorAll('#routes-table tr[data-id]').length`, &rows),
		chromedp.Text(`#routes-pager span`, &count, chromedp.ByQuery),
	)
	if rows != 100 || count != "1–100 of 101" {
		t.Fatalf("first page: %d rows, %q", rows, count)
	}
	step("the next page",
		chromedp.Click(`#routes-next`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="routes-table"]//strong[text()="paged-100"]`, chromedp.BySearch),
		chromedp.Evaluate(`document.querySelectorAll('#routes-table tr[data-id]').length`, &rows),
	)
	if rows != 1 {
		t.Fatalf("second page: %d rows", rows)
	}
	step("a link to a route of the second page",
		chromedp.Navigate(g.AdminURL+"/#overview"),
		chromedp.WaitVisible(`#config-cards`, chromedp.ByQuery),
		chromedp.Navigate(fmt.Sprintf("%s/#routes/%d", g.AdminURL, last)),
		chromedp.WaitVisible(fmt.Sprintf(`#routes-table tr.sel[data-id="%d"]`, last), chromedp.ByQuery),
	)
}

// With more routes than the names cache's page (1,000), the dashboard
// never asks for the whole list of routes (at tens of thousands that is
// megabytes and seconds of the server's work, every 10 s while the
// overview is open): a route beyond the page is named by looking it up
// alone.
func TestBrowserManyRoutesNamed(t *testing.T) {
	bin := chromium(t)
	g := testgw.Start(t, nil)
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(textServer(t, "ok").URL, "http://"))
	portN, _ := strconv.Atoi(port)
	const n = 1005
	routes := make([]map[string]any, n)
	for i := range routes {
		routes[i] = map[string]any{"id": i + 1, "name": fmt.Sprintf("r%d", i+1), "service_id": 1, "paths": []string{fmt.Sprintf("/p%d", i+1)}}
	}
	g.Must("POST", "/api/v1/import", map[string]any{"format": "gateway-export", "version": 1,
		"services": []any{map[string]any{"id": 1, "name": "s", "targets": []any{map[string]any{"host": host, "port": portN}}}},
		"routes":   routes})
	ctx := browser(t, bin)
	step := stepper(t, ctx)
	step("the overview and the log, with a request to the last route",
		screen(g, "overview", `#config-cards`),
		screen(g, "log", `#log-table`),
		chromedp.ActionFunc(func(context.Context) error {
			if a := g.Proxy(t, "GET", fmt.Sprintf("/p%d", n), nil); a.Status != 200 {
				return fmt.Errorf("proxy: %d", a.Status)
			}
			return nil
		}),
		chromedp.WaitVisible(fmt.Sprintf(`//tbody[@id="log-rows"]//a[text()="r%d"]`, n), chromedp.BySearch),
	)
	var last []map[string]any
	g.JSON("GET", fmt.Sprintf("/api/v1/routes?offset=%d&limit=1", n-1), nil, &last)
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-id", "scope": "route", "route_id": last[0]["id"]})
	var routeID string
	step("a plugin on the last route: named, and edited by route id",
		screen(g, "plugins", `#plugins-table`),
		chromedp.WaitVisible(fmt.Sprintf(`//table[@id="plugins-table"]//a[text()="r%d"]`, n), chromedp.BySearch),
		chromedp.Click(`//table[@id="plugins-table"]//button[text()="Edit"]`, chromedp.BySearch),
		chromedp.WaitVisible(`input[name=route_id][type=number]`, chromedp.ByQuery),
		chromedp.Value(`input[name=route_id]`, &routeID, chromedp.ByQuery),
	)
	if routeID != fmt.Sprint(last[0]["id"]) {
		t.Fatalf("the plugin form's route id: %q, want %v", routeID, last[0]["id"])
	}
	var whole []string
	step("no request for every route",
		chromedp.Evaluate(`performance.getEntriesByType('resource').map(e => new URL(e.name)).filter(u => u.pathname === '/api/v1/routes' && !u.searchParams.has('limit')).map(u => u.href)`, &whole),
	)
	if len(whole) > 0 {
		t.Fatalf("the dashboard asked for the whole list of routes: %v", whole)
	}
}
