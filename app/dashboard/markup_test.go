package dashboard_test

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestBrowserStoredMarkupStaysText: markup an editor stores in names,
// groups and plugin configs, and markup any client puts in a proxied
// request's path, is shown as text on every screen: no element of it
// appears in the page and none of its script runs (the dashboard builds
// its DOM with textContent and attributes, never HTML strings).
func TestBrowserStoredMarkupStaysText(t *testing.T) {
	bin := chromium(t)
	const x = `<img src=x data-xss=1 onerror="window.__xss=1"><svg data-xss=1 onload="window.__xss=1">"'`
	up := textServer(t, "ok")
	g := testgw.Start(t, nil)
	sid := g.Service(x, testgw.Addr(up))
	rid := g.Route(x, sid, testgw.Paths("/m"))
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-transform", "scope": "route", "route_id": rid,
		"config": map[string]any{"set_headers": map[string]any{"X-A": x}}})
	g.Must("POST", "/api/v1/consumers", map[string]any{"username": x, "custom_id": x, "groups": []string{x}})

	ctx := browser(t, bin)
	step := stepper(t, ctx)
	step("the live log is open", screen(g, "log", `#live-state.live`))
	g.Get("", "/m/"+url.PathEscape(x))
	step("the request reaches the log", chromedp.WaitVisible(`#log-rows tr`, chromedp.ByQuery))
	for _, v := range []struct{ hash, ready string }{
		{"log", `#log-rows tr`}, {"overview", `#config-cards`}, {"services", `#services-table`}, {"routes", `#routes-table`},
		{"plugins", `#plugins-table`}, {"consumers", `#consumers-table`},
	} {
		var injected int
		var shown bool
		step("#"+v.hash,
			screen(g, v.hash, v.ready),
			chromedp.Evaluate(`document.querySelectorAll('[data-xss]').length + (window.__xss ? 100 : 0)`, &injected),
			chromedp.Evaluate(`document.body.innerText.includes('<img src=x data-xss=1')`, &shown),
		)
		if injected != 0 {
			t.Errorf("#%s: stored markup became page elements (%d)", v.hash, injected)
		}
		if !shown && v.hash != "overview" {
			t.Errorf("#%s: the stored text is not shown", v.hash)
		}
	}
}
