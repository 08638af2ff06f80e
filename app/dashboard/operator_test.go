package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestBrowserTraffic: the overview draws the last hour from
// GET /api/v1/metrics/history (requests by status class, latency, top routes
// and consumers by name, with links) and keeps it live from the event
// stream; the health table names services and marks unhealthy targets; the
// service's target list shows health; the live log shows routes and
// consumers by name, filters by status class, route and consumer, and
// opens a row's details; the open-mode banner leads to creating the first
// admin.
func TestBrowserTraffic(t *testing.T) {
	bin := chromium(t)
	upstream := textServer(t, "ok")
	g := testgw.Start(t, nil)
	svc := g.Service("web-svc", strings.TrimPrefix(upstream.URL, "http://"))
	web := g.Route("web-route", svc, testgw.Paths("/web"))
	dead := g.DeadService("dead-svc")
	broken := g.Route("broken-route", dead, testgw.Paths("/broken"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": web})
	alice := g.Consumer("alice", map[string]any{"type": "key-auth", "key": "k-alice"})
	keyed := func(n int) {
		for i := 0; i < n; i++ {
			if a := g.Proxy(t, "GET", "/web/page", nil, "apikey", "k-alice"); a.Status != 200 {
				t.Fatalf("keyed request: %d %s", a.Status, a.Body)
			}
		}
	}
	keyed(5)
	for i := 0; i < 3; i++ {
		if st, _, _ := g.Get("", "/broken"); st < 500 {
			t.Fatalf("broken route: %d", st)
		}
	}
	g.Get("", "/nowhere")

	ctx := browser(t, bin)
	step := stepper(t, ctx)
	var bars, lines int
	var topRoute, topErr, topCons, banner string
	step("the overview draws the last hour",
		chromedp.Navigate(g.AdminURL+"/"),
		chromedp.WaitVisible(`#chart-requests rect.series`, chromedp.ByQuery),
		chromedp.WaitVisible(`#chart-latency .series`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#chart-requests rect.series').length`, &bars),
		chromedp.Evaluate(`document.querySelectorAll('#chart-latency .series').length`, &lines),
		chromedp.Text(`#top-routes`, &topRoute, chromedp.ByQuery),
		chromedp.Text(`#top-route-errors`, &topErr, chromedp.ByQuery),
		chromedp.Text(`#top-consumers`, &topCons, chromedp.ByQuery),
		chromedp.Text(`#open-banner`, &banner, chromedp.ByQuery),
	)
	if bars < 3 || lines < 3 { // 2xx, 4xx, 5xx columns; p50, p95, p99
		t.Errorf("charts: %d request columns, %d latency series", bars, lines)
	}
	if !strings.Contains(topRoute, "web-route") || !strings.Contains(topRoute, "broken-route") || !strings.Contains(topErr, "broken-route") ||
		strings.Contains(topErr, "web-route") || !strings.Contains(topCons, "alice") {
		t.Errorf("top lists: %q / %q / %q", topRoute, topErr, topCons)
	}
	if !strings.Contains(banner, "The admin API is open") {
		t.Errorf("open-mode banner: %q", banner)
	}
	var webFive string
	step("the columns count the requests",
		chromedp.Evaluate(`[...document.querySelectorAll('#top-routes tr')].map(tr => tr.textContent).join('|')`, &webFive),
	)
	if !strings.Contains(webFive, "web-route5") {
		t.Errorf("top routes rows: %q", webFive)
	}
	var healthRow string
	step("the health table names the service and marks the unhealthy target",
		chromedp.WaitVisible(`#health tr.bad`, chromedp.ByQuery),
		chromedp.Text(`#health tr.bad`, &healthRow, chromedp.ByQuery),
	)
	if !strings.Contains(healthRow, "dead-svc") || !strings.Contains(healthRow, "unhealthy") {
		t.Errorf("unhealthy row: %q", healthRow)
	}
	shot(t, ctx, "overview-charts")

	keyed(4)
	step("new requests reach the charts through the event stream",
		chromedp.Poll(`[...document.querySelectorAll('#top-consumers tr')].some(tr => tr.textContent.includes('alice9'))`, nil),
	)

	step("a route link opens the route",
		chromedp.Click(`#top-route-errors a.ref`, chromedp.ByQuery),
		chromedp.WaitVisible(fmt.Sprintf(`#routes-table tr.sel[data-id="%d"]`, broken), chromedp.ByQuery),
	)
	var targetRow string
	step("the service's targets show their health",
		chromedp.Navigate(fmt.Sprintf("%s/#services/%d", g.AdminURL, dead)),
		chromedp.WaitVisible(`#targets-table tr.bad`, chromedp.ByQuery),
		chromedp.Text(`#targets-table tr.bad`, &targetRow, chromedp.ByQuery),
	)
	if !strings.Contains(targetRow, "unhealthy") || !strings.Contains(targetRow, "connection refused") {
		t.Errorf("target row: %q", targetRow)
	}
	shot(t, ctx, "services-targets")

	var rows, detail string
	var n5, nAlice int
	step("the live log: names, filters and a row's details",
		chromedp.Navigate(g.AdminURL+"/#log"),
		chromedp.WaitVisible(`//tbody[@id="log-rows"]//a[text()="alice"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//tbody[@id="log-rows"]//a[text()="broken-route"]`, chromedp.BySearch),
	)
	step("filter 5xx",
		chromedp.SetValue(`#log-class`, "5xx", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#log-class').dispatchEvent(new Event('change'))`, nil),
		chromedp.Evaluate(`document.querySelectorAll('#log-rows tr[data-id]').length`, &n5),
	)
	step("filter consumer",
		chromedp.SetValue(`#log-class`, "", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#log-class').dispatchEvent(new Event('change'))`, nil),
		chromedp.WaitReady(fmt.Sprintf(`#log-consumer option[value="%d"]`, alice), chromedp.ByQuery),
		chromedp.SetValue(`#log-consumer`, fmt.Sprint(alice), chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#log-consumer').dispatchEvent(new Event('change'))`, nil),
		chromedp.Evaluate(`document.querySelectorAll('#log-rows tr[data-id]').length`, &nAlice),
		chromedp.Text(`#log-rows`, &rows, chromedp.ByQuery),
	)
	step("detail",
		chromedp.Click(`#log-rows tr[data-id] td.mono`, chromedp.ByQuery),
		chromedp.WaitVisible(`#log-detail-panel`, chromedp.ByQuery),
		chromedp.Text(`#log-detail-panel dl`, &detail, chromedp.ByQuery),
	)
	if n5 != 3 || nAlice != 9 || strings.Contains(rows, "broken-route") {
		t.Errorf("filters: %d rows of 5xx (want 3), %d of alice (want 9): %q", n5, nAlice, rows)
	}
	if !strings.Contains(detail, "web-route") || !strings.Contains(detail, "alice") || !strings.Contains(detail, "web-svc") {
		t.Errorf("detail: %q", detail)
	}
	shot(t, ctx, "log-detail")

	var role string
	step("the banner leads to creating the first admin",
		chromedp.Click(`#open-banner-link`, chromedp.ByQuery),
		chromedp.WaitVisible(`#user-form`, chromedp.ByQuery),
		chromedp.Value(`#user-form select[name=role]`, &role, chromedp.ByQuery),
	)
	if role != "admin" {
		t.Errorf("first user's role: %q", role)
	}
}

// TestBrowserPluginForm: the plugin form is generated from the type's
// declaration: nothing is chosen or pre-filled (no global rate limit of
// one request), every invalid field shows its own error before anything is
// sent, defaults are placeholders that the server applies, an edit shows
// the stored values, the raw JSON toggle carries the config both ways, and
// an API error is shown at the field it names.
func TestBrowserPluginForm(t *testing.T) {
	bin := chromium(t)
	g := testgw.Start(t, nil)
	svc := g.Service("form-svc")
	route := g.Route("form-route", svc, map[string]any{"paths": []string{"/f"}})
	ctx := browser(t, bin)
	step := stepper(t, ctx)

	var typ, scope, limit, windowPH, keyOpt string
	var fields int
	step("a new plugin: no type, the route scope",
		openNew(g, "plugins", `#plugins-table`, "plugin"),
		chromedp.WaitVisible(`#plugin-form`, chromedp.ByQuery),
		chromedp.Value(`#plugin-form select[name=type]`, &typ, chromedp.ByQuery),
		chromedp.Value(`#plugin-form select[name=scope]`, &scope, chromedp.ByQuery),
	)
	if typ != "" || scope != "route" {
		t.Errorf("new plugin form: type %q scope %q", typ, scope)
	}
	step("choosing rate-limit shows its declared fields",
		chromedp.SetValue(`#plugin-form select[name=type]`, "rate-limit", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#plugin-form select[name=type]').dispatchEvent(new Event('change'))`, nil),
		chromedp.WaitVisible(`#plugin-form input[name="config.limit"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#plugin-config [data-kind]').length`, &fields),
		chromedp.Value(`#plugin-form input[name="config.limit"]`, &limit, chromedp.ByQuery),
		chromedp.AttributeValue(`#plugin-form input[name="config.window_s"]`, "placeholder", &windowPH, nil, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#plugin-form select[name="config.key"] option').textContent`, &keyOpt),
	)
	if fields != 8 || limit != "" || windowPH != "default: 60" || keyOpt != "default (ip)" {
		t.Errorf("rate-limit fields: %d, limit %q, window placeholder %q, key %q", fields, limit, windowPH, keyOpt)
	}
	var errs []string
	step("every invalid field shows its error",
		chromedp.SetValue(`#plugin-form input[name="config.window_s"]`, "0", chromedp.ByQuery),
		chromedp.SetValue(`#plugin-form input[name="config.header_name"]`, "bad name", chromedp.ByQuery),
		chromedp.Click(`#plugin-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#plugin-form .field-err`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll('#plugin-form .field-err')].map(e => e.closest('label').querySelector('[name]').name)`, &errs),
	)
	if strings.Join(errs, ",") != "config.header_name,config.limit,config.window_s" {
		t.Errorf("fields with errors: %v", errs)
	}
	shot(t, ctx, "plugin-form-errors")
	var ps []map[string]any
	if g.JSON("GET", "/api/v1/plugins", nil, &ps); len(ps) != 0 {
		t.Fatalf("an invalid form was sent: %v", ps)
	}
	step("a valid form creates the plugin",
		chromedp.SetValue(`#plugin-form input[name="config.limit"]`, "100", chromedp.ByQuery),
		chromedp.SetValue(`#plugin-form input[name="config.window_s"]`, "30", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#plugin-form input[name="config.header_name"]').value = ''`, nil),
		chromedp.Click(`#plugin-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="plugins-table"]//strong[text()="rate-limit"]`, chromedp.BySearch),
	)
	g.JSON("GET", "/api/v1/plugins", nil, &ps)
	if len(ps) != 1 || ps[0]["route_id"] != float64(route) || fmt.Sprint(ps[0]["config"]) != "map[fault_tolerant:true header_name: ipv6_prefix_length:64 key:ip limit:100 policy:local sync_interval_ms:0 window_s:30]" {
		t.Fatalf("plugin created by the form: %v", ps)
	}
	var editLimit, rawJSON string
	step("editing shows the stored values; the JSON toggle carries them",
		chromedp.Click(`//table[@id="plugins-table"]//button[text()="Edit"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#plugin-form input[name="config.limit"]`, chromedp.ByQuery),
		chromedp.Value(`#plugin-form input[name="config.limit"]`, &editLimit, chromedp.ByQuery),
		chromedp.SetValue(`#plugin-form input[name="config.limit"]`, "250", chromedp.ByQuery),
		chromedp.Click(`#plugin-form input[name=raw_config]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#plugin-form textarea[name=config]`, chromedp.ByQuery),
		chromedp.Value(`#plugin-form textarea[name=config]`, &rawJSON, chromedp.ByQuery),
	)
	if editLimit != "100" || !strings.Contains(rawJSON, `"limit": 250`) {
		t.Errorf("edit: limit %q, raw %q", editLimit, rawJSON)
	}
	var apiErr string
	step("an API error is shown at its field",
		chromedp.SetValue(`#plugin-form textarea[name=config]`, `{"limit": 5, "bogus": 1}`, chromedp.ByQuery),
		chromedp.Click(`#plugin-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#plugin-form label.invalid textarea[name=config]`, chromedp.ByQuery),
		chromedp.Text(`#plugin-form label.invalid .field-err`, &apiErr, chromedp.ByQuery),
	)
	if !strings.Contains(apiErr, "bogus") {
		t.Errorf("API error at the field: %q", apiErr)
	}
	shot(t, ctx, "plugin-form-json")
	step("back to the fields",
		chromedp.SetValue(`#plugin-form textarea[name=config]`, `{"limit": 7, "key": "consumer"}`, chromedp.ByQuery),
		chromedp.Click(`#plugin-form input[name=raw_config]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#plugin-form input[name="config.limit"]`, chromedp.ByQuery),
		chromedp.Value(`#plugin-form input[name="config.limit"]`, &editLimit, chromedp.ByQuery),
		chromedp.Value(`#plugin-form select[name="config.key"]`, &keyOpt, chromedp.ByQuery),
	)
	if editLimit != "7" || keyOpt != "consumer" {
		t.Errorf("fields from JSON: limit %q key %q", editLimit, keyOpt)
	}
	shot(t, ctx, "plugin-form")
}

// TestBrowserCoverage: an app is exposed from one screen after probing its
// upstream; the certificates page sets the Cloudflare token and EAB
// credentials; the plugins page purges the cache; a route's traffic
// splits are edited by service name; a target's host and port are edited.
func TestBrowserCoverage(t *testing.T) {
	bin := chromium(t)
	upstream := textServer(t, "app")
	g := testgw.Start(t, nil)
	ctx := browser(t, bin)
	step := stepper(t, ctx)

	var probe, result string
	step("expose an app after probing its upstream",
		screen(g, "apps", `#app-form`),
		typeInto(`#app-form`, "name", "shop", "domain", "shop.example.test", "upstream_url", upstream.URL),
		chromedp.Click(`#probe-button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#probe-result p`, chromedp.ByQuery),
		chromedp.Text(`#probe-result`, &probe, chromedp.ByQuery),
		chromedp.Click(`#app-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#app-result .ok`, chromedp.ByQuery),
		chromedp.Text(`#app-result`, &result, chromedp.ByQuery),
	)
	if !strings.Contains(probe, "Reachable") || !strings.Contains(probe, "HTTP 200") {
		t.Errorf("probe: %q", probe)
	}
	if !strings.Contains(result, "http://shop.example.test") {
		t.Errorf("app result: %q", result)
	}
	if st, body, _ := g.Get("shop.example.test", "/"); st != 200 || body != "app" {
		t.Errorf("the exposed app answers %d %q", st, body)
	}
	shot(t, ctx, "apps")

	var cfState string
	step("the Cloudflare token and EAB credentials",
		screen(g, "certificates", `#cloudflare-form`),
		typeInto(`#cloudflare-form`, "token", "cf-token-123"),
		chromedp.Click(`#cloudflare-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//div[@id="acme-panel"]//strong[text()="configured"]`, chromedp.BySearch),
		chromedp.Text(`#acme-panel`, &cfState, chromedp.ByQuery),
		typeInto(`#eab-form`, "directory_url", "zerossl", "key_id", "kid-1", "hmac_key", "aGVsbG8td29ybGQ"),
		chromedp.Click(`#eab-form button[type=submit]`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('#eab-status').textContent.startsWith('Saved')`, nil),
	)
	if strings.Contains(cfState, "cf-token-123") {
		t.Error("the token is shown")
	}
	if m := g.Must("GET", "/api/v1/acme/cloudflare-token", nil); m["configured"] != true {
		t.Errorf("cloudflare token: %v", m)
	}
	if m := g.Must("GET", "/api/v1/acme/eab?directory_url=zerossl", nil); m["configured"] != true {
		t.Errorf("eab: %v", m)
	}
	shot(t, ctx, "certificates")

	var purged string
	step("purge the cache",
		screen(g, "plugins", `#plugins-table`),
		clickButton("Purge cache"),
		chromedp.Poll(`document.querySelector('#purge-result').textContent !== ''`, nil),
		chromedp.Text(`#purge-result`, &purged, chromedp.ByQuery),
	)
	if purged != "Purged 0 cached responses." {
		t.Errorf("purge: %q", purged)
	}

	var apps []map[string]any
	g.JSON("GET", "/api/v1/routes", nil, &apps)
	green := g.Service("green", strings.TrimPrefix(upstream.URL, "http://"))
	step("edit a route's splits by service name",
		screen(g, "routes", `#routes-table`),
		chromedp.Click(`//table[@id="routes-table"]//tr[.//strong[text()="shop"]]//button[text()="Edit"]`, chromedp.BySearch),
		chromedp.WaitVisible(`#route-form input[name=splits]`, chromedp.ByQuery),
		chromedp.SetValue(`#route-form input[name=splits]`, "shop=90, green=10", chromedp.ByQuery),
		chromedp.Click(`#route-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="routes-table"]//td[contains(text(), "split: shop 90, green 10")]`, chromedp.BySearch),
	)
	var rt map[string]any
	g.JSON("GET", fmt.Sprintf("/api/v1/routes/%v", apps[0]["id"]), nil, &rt)
	if fmt.Sprint(rt["splits"]) != fmt.Sprintf("[map[service_id:%v weight:90] map[service_id:%d weight:10]]", apps[0]["service_id"], green) {
		t.Errorf("splits: %v", rt["splits"])
	}
	shot(t, ctx, "routes")

	var targets []map[string]any
	step("edit a target's host and port",
		chromedp.Navigate(fmt.Sprintf("%s/#services/%d", g.AdminURL, green)),
		chromedp.WaitVisible(`#targets-table`, chromedp.ByQuery),
		chromedp.Click(`//table[@id="targets-table"]//button[text()="Edit"]`, chromedp.BySearch),
		chromedp.SetValue(`#target-form input[name=port]`, "1", chromedp.ByQuery),
		chromedp.Click(`#target-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//table[@id="targets-table"]//tr[td[3][text()="1"]]`, chromedp.BySearch),
	)
	g.JSON("GET", fmt.Sprintf("/api/v1/services/%d/targets", green), nil, &targets)
	if len(targets) != 1 || targets[0]["port"] != 1.0 {
		t.Errorf("targets after the edit: %v", targets)
	}
	shot(t, ctx, "services")
}

// textServer is an upstream answering body to every request.
func textServer(t *testing.T, body string) *httptest.Server {
	s := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) })
	return s
}
