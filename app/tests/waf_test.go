package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/records"
	"github.com/caddy-gateway/gateway/modules/plugins/waf"
)

// The waf plugin through the real gateway: blocks before the upstream,
// records what matched, detect mode, exclusions, custom and refused
// directives, body limits, and reloads with traffic in flight.

const sqli = "/items?q=1%27%20OR%201%3D1--"

// countingUpstream answers 200 with the length of the body it received
// and counts its requests.
func countingUpstream(t *testing.T) (string, *atomic.Int64) {
	var calls atomic.Int64
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int{"received": len(b)})
	})
	return testgw.Addr(up), &calls
}

// lastRecord is the newest request record.
func lastRecord(t *testing.T, g *testgw.Gateway) *records.Record {
	t.Helper()
	var recs []*records.Record
	g.JSON("GET", "/api/v1/requests?limit=1", nil, &recs)
	if len(recs) == 0 {
		t.Fatal("no request record")
	}
	return recs[0]
}

func ruleIDs(w *records.WAF) []int {
	var ids []int
	for _, r := range w.Rules {
		ids = append(ids, r.ID)
	}
	return ids
}

// browser are the headers of an ordinary client (a request without them
// is itself an anomaly to the CRS).
var browser = []string{"Host", "api.example.com", "User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0", "Accept", "application/json"}

func hdrs(extra ...string) []string { return append(slices.Clone(browser), extra...) }

func TestWAFBlocksDetectsAndRecords(t *testing.T) {
	g := testgw.Start(t, nil)
	addr, calls := countingUpstream(t)
	svc := g.Service("api", addr)
	blockRoute := g.Route("blocking", svc, testgw.Paths("/items"))
	detectRoute := g.Route("detecting", svc, testgw.Paths("/detect"))
	addPlugin(t, g, "waf", "route", blockRoute, nil)
	addPlugin(t, g, "waf", "route", detectRoute, map[string]any{"mode": "detect"})

	p := send(t, g, "GET", sqli, nil, hdrs()...)
	wantGatewayError(t, p, 403, "request blocked by the web application firewall")
	if calls.Load() != 0 {
		t.Fatal("the upstream was contacted for a blocked request")
	}
	rec := lastRecord(t, g)
	if rec.WAF == nil || rec.WAF.Action != "blocked" || rec.WAF.AnomalyScore < 5 || rec.Status != 403 {
		t.Fatalf("record %+v waf %+v", rec, rec.WAF)
	}
	if ids := ruleIDs(rec.WAF); !slices.Contains(ids, 942100) || !slices.Contains(ids, 949110) {
		t.Fatalf("matched rules %v, want 942100 (SQL injection) and 949110 (the inbound score)", ids)
	}

	p = send(t, g, "GET", "/detect?q=1%27%20OR%201%3D1--", nil, hdrs()...)
	if p.Status != 200 || calls.Load() != 1 {
		t.Fatalf("detect mode: %d %s, upstream calls %d", p.Status, p.Body, calls.Load())
	}
	rec = lastRecord(t, g)
	if rec.WAF == nil || rec.WAF.Action != "detected" || rec.WAF.AnomalyScore < 5 || !slices.Contains(ruleIDs(rec.WAF), 942100) {
		t.Fatalf("detect record %+v", rec.WAF)
	}

	p = send(t, g, "GET", "/items?page=2&sort=name", nil, hdrs()...)
	if p.Status != 200 {
		t.Fatalf("clean request: %d %s", p.Status, p.Body)
	}
	if rec := lastRecord(t, g); rec.WAF != nil {
		t.Fatalf("clean request recorded %+v", rec.WAF)
	}

	// Prometheus: blocks and detections per route and rule.
	resp, err := http.Get(g.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range [][]string{
		{`gateway_waf_rule_matches_total{action="blocked",`, `route="blocking",route_id="` + itoa(blockRoute) + `",rule_id="942100"} 1`},
		{`gateway_waf_rule_matches_total{action="detected",`, `route="detecting",route_id="` + itoa(detectRoute) + `",rule_id="942100"} 1`},
	} {
		found := false
		for _, l := range strings.Split(string(body), "\n") {
			found = found || (strings.HasPrefix(l, want[0]) && strings.HasSuffix(l, want[1]))
		}
		if !found {
			t.Errorf("/metrics lacks %s…%s in:\n%s", want[0], want[1], grepLines(string(body), "waf"))
		}
	}
}

func TestWAFExclusionsAndDirectives(t *testing.T) {
	g := testgw.Start(t, nil)
	addr, calls := countingUpstream(t)
	svc := g.Service("api", addr)
	route := g.Route("r", svc, testgw.Paths("/items"))
	id := addPlugin(t, g, "waf", "route", route, nil)

	wantGatewayError(t, send(t, g, "GET", sqli, nil, hdrs()...), 403, "")
	var matched []int
	for _, id := range ruleIDs(lastRecord(t, g).WAF) {
		if id < 949000 || id >= 950000 {
			matched = append(matched, id)
		}
	}
	// Excluding the rules that matched lets the request through.
	put := map[string]any{"type": "waf", "scope": "route", "route_id": route, "config": map[string]any{"exclude_rule_ids": matched}}
	if st, b := g.Do("PUT", "/api/v1/plugins/"+itoa(id), put); st != 200 {
		t.Fatalf("PUT: %d %s", st, b)
	}
	if p := send(t, g, "GET", sqli, nil, hdrs()...); p.Status != 200 {
		t.Fatalf("excluded rules %v still block: %d %s", matched, p.Status, p.Body)
	}

	// A custom rule appended after the CRS.
	put["config"] = map[string]any{"directives": "# the admins' own rule\nSecRule REQUEST_HEADERS:X-Internal-Probe \"@streq yes\" \\\n  \"id:10001,phase:1,deny,status:403,log,msg:'internal probe from outside'\""}
	if st, b := g.Do("PUT", "/api/v1/plugins/"+itoa(id), put); st != 200 {
		t.Fatalf("PUT directives: %d %s", st, b)
	}
	before := calls.Load()
	wantGatewayError(t, send(t, g, "GET", "/items", nil, hdrs("X-Internal-Probe", "yes")...), 403, "")
	if calls.Load() != before {
		t.Fatal("the upstream was contacted")
	}
	rec := lastRecord(t, g)
	if rec.WAF == nil || rec.WAF.Rules[0].ID != 10001 || rec.WAF.Rules[0].Message != "internal probe from outside" {
		t.Fatalf("record %+v", rec.WAF)
	}

	// Refused directives: 400 naming the directive, nothing changed.
	for directives, want := range map[string]string{
		"Include @owasp_crs/REQUEST-911-METHOD-ENFORCEMENT.conf":                    "directive Include is not allowed",
		"SecAuditLog /tmp/audit.log":                                                "directive SecAuditLog is not allowed",
		"SecDebugLog /tmp/debug.log":                                                "directive SecDebugLog is not allowed",
		"SecAuditEngine On":                                                         "directive SecAuditEngine is not allowed",
		"SecRemoteRules k https://127.0.0.1:1/rules":                                "directive SecRemoteRules is not allowed",
		`SecRule ARGS "@pmFromFile /etc/passwd" "id:10002,phase:2,deny"`:            "SecRule uses @pmFromFile",
		`SecRule REMOTE_ADDR "@ipMatchFromFile /etc/hosts" "id:10003,phase:1,deny"`: "SecRule uses @ipMatchFromFile",
		`SecRule FILES "@inspectFile /bin/true" "id:10004,phase:2,deny"`:            "SecRule uses @inspectFile",
		"SecRuleEngine Off":                                                         "the plugin's mode sets it",
		`SecRule ARGS "@rx (" "id:10005,phase:2,deny"`:                              "config.directives: ",
	} {
		put["config"] = map[string]any{"directives": directives}
		st, b := g.Do("PUT", "/api/v1/plugins/"+itoa(id), put)
		var e struct{ Error string }
		_ = json.Unmarshal(b, &e)
		if st != 400 || !strings.Contains(e.Error, "config.directives") || !strings.Contains(e.Error, want) {
			t.Errorf("%q: %d %s, want 400 naming %q", directives, st, b, want)
		}
	}
	if p := send(t, g, "GET", "/items", nil, hdrs("X-Internal-Probe", "yes")...); p.Status != 403 {
		t.Fatalf("a refused change changed the running config: %d", p.Status)
	}
}

func TestWAFBodyLimits(t *testing.T) {
	g := testgw.Start(t, nil)
	addr, calls := countingUpstream(t)
	svc := g.Service("api", addr)
	reject := g.Route("reject", svc, testgw.Paths("/reject"))
	partial := g.Route("partial", svc, testgw.Paths("/partial"))
	addPlugin(t, g, "waf", "route", reject, map[string]any{"request_body_limit": 4096})
	addPlugin(t, g, "waf", "route", partial, map[string]any{"request_body_limit": 4096, "body_limit_action": "partial"})

	form := "application/x-www-form-urlencoded"
	attack := "comment=" + url.QueryEscape("1' UNION SELECT password FROM users--")
	padding := "pad=" + strings.Repeat("a", 8000)

	// within the limit: inspected
	wantGatewayError(t, send(t, g, "POST", "/reject", strings.NewReader(attack), hdrs("Content-Type", form)...), 403, "")
	wantGatewayError(t, send(t, g, "POST", "/partial", strings.NewReader(attack+"&"+padding), hdrs("Content-Type", form)...), 403, "")
	// over it: reject answers 413 without the upstream (declared and chunked)
	wantGatewayError(t, send(t, g, "POST", "/reject", strings.NewReader(padding), hdrs("Content-Type", form)...), 413, "")
	wantGatewayError(t, send(t, g, "POST", "/reject", io.MultiReader(strings.NewReader(padding)), hdrs("Content-Type", form)...), 413, "")
	if calls.Load() != 0 {
		t.Fatalf("upstream contacted %d times", calls.Load())
	}
	// partial inspects the first 4096 bytes and forwards the whole body
	body := padding + "&" + attack
	p := send(t, g, "POST", "/partial", strings.NewReader(body), hdrs("Content-Type", form)...)
	var got map[string]int
	if p.Status != 200 || json.Unmarshal([]byte(p.Body), &got) != nil || got["received"] != len(body) {
		t.Fatalf("partial: %d %s, want the whole %d bytes upstream", p.Status, p.Body, len(body))
	}
	p = send(t, g, "POST", "/partial", io.MultiReader(strings.NewReader(body)), hdrs("Content-Type", form)...)
	if p.Status != 200 || json.Unmarshal([]byte(p.Body), &got) != nil || got["received"] != len(body) {
		t.Fatalf("partial, chunked: %d %s, want the whole %d bytes upstream", p.Status, p.Body, len(body))
	}
}

// TestWAFFalsePositives sends ordinary API traffic through a waf plugin at
// paranoia level 1 with its defaults: none of it may be blocked.
func TestWAFFalsePositives(t *testing.T) {
	g := testgw.Start(t, nil)
	addr, _ := countingUpstream(t)
	svc := g.Service("api", addr)
	route := g.Route("api", svc, testgw.Paths("/"))
	addPlugin(t, g, "waf", "route", route, nil)

	jsonCT := []string{"Content-Type", "application/json"}
	formCT := []string{"Content-Type", "application/x-www-form-urlencoded"}
	var upload bytes.Buffer
	mw := multipart.NewWriter(&upload)
	_ = mw.WriteField("title", "Quarterly report — Q3 (final)")
	fw, _ := mw.CreateFormFile("file", "report-2024.pdf")
	chunk := bytes.Repeat([]byte("%PDF-1.7 binary-ish data 0123456789 abcdefghijklmnopqrstuvwxyz\n"), 2000)
	_, _ = fw.Write(chunk[:120<<10])
	_ = mw.Close()

	cases := []struct {
		name, method, path string
		body               string
		hdr                []string
	}{
		{"list", "GET", "/v1/orders?page=3&per_page=50&sort=-created_at", "", nil},
		{"search words", "GET", "/v1/products?q=" + url.QueryEscape("select a size and drop it in the cart"), "", nil},
		{"unicode query", "GET", "/v1/cities?name=" + url.QueryEscape("Zürich — São Paulo — 東京 — Kraków"), "", nil},
		{"uuid path", "GET", "/v1/users/8a6e0804-2bd0-4672-b79d-d97027f9071a/settings", "", nil},
		{"date range", "GET", "/v1/reports?from=2024-01-01T00:00:00Z&to=2024-03-31T23:59:59Z", "", nil},
		{"json quotes", "POST", "/v1/customers", `{"name":"Seán O'Brien","company":"O'Reilly & Sons","note":"He said \"hello\" and left"}`, jsonCT},
		{"json sql words", "POST", "/v1/tickets", `{"subject":"Cannot select or update my plan","body":"When I select the annual plan and then update my card, the order is dropped. Where is the delete button? 1 or 2 times a week.","priority":"high"}`, jsonCT},
		{"json unicode", "PUT", "/v1/profiles/42", `{"display_name":"Zoë Ångström","bio":"Entwicklerin in München 🚀, 日本語も話せます","tags":["café","naïve","résumé"]}`, jsonCT},
		{"json nested", "POST", "/v1/events", `{"type":"checkout","items":[{"sku":"A-100","qty":2,"price":19.99},{"sku":"B-7","qty":1,"price":5}],"meta":{"source":"web","ab":{"variant":"b"}}}`, jsonCT},
		{"json numbers", "PATCH", "/v1/inventory/9", `{"count":-3,"ratio":0.25,"limits":[1,2,3],"enabled":true,"parent":null}`, jsonCT},
		{"form", "POST", "/v1/contact", "name=Jane+Doe&email=jane.doe%40example.com&message=" + url.QueryEscape("Hi! Could you update the order #123 and select express shipping? Thanks."), formCT},
		{"upload", "POST", "/v1/files", upload.String(), []string{"Content-Type", mw.FormDataContentType()}},
		{"delete", "DELETE", "/v1/sessions/current", "", nil},
		{"bearer", "GET", "/v1/me", "", []string{"Authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJl"}},
		{"cookie", "GET", "/v1/cart", "", []string{"Cookie", "session=3f9a1c77; theme=dark; lang=en-GB"}},
	}
	for _, c := range cases {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		p := send(t, g, c.method, c.path, body, hdrs(c.hdr...)...)
		if p.Status != 200 {
			rec := lastRecord(t, g)
			t.Errorf("%s: %d %s (waf %+v)", c.name, p.Status, p.Body, rec.WAF)
		}
	}
}

// TestWAFReloadInFlight changes the configuration while requests are in
// flight: every clean request is served and every attack blocked
// throughout, and a change that leaves the waf config as it was compiles
// no rule set.
func TestWAFReloadInFlight(t *testing.T) {
	g := testgw.Start(t, nil)
	addr, _ := countingUpstream(t)
	svc := g.Service("api", addr)
	route := g.Route("items", svc, testgw.Paths("/items"))
	id := addPlugin(t, g, "waf", "route", route, nil)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures atomic.Int64
	var sent atomic.Int64
	var firstFailure atomic.Value
	for i := range 4 {
		wg.Go(func() {
			client := &http.Client{}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				path, want := "/items?page=2", 200
				if (n+i)%2 == 1 {
					path, want = sqli, 403
				}
				req, _ := http.NewRequest("GET", g.ProxyURL+path, nil)
				for j := 0; j+1 < len(browser); j += 2 {
					if browser[j] == "Host" {
						req.Host = browser[j+1]
					} else {
						req.Header.Set(browser[j], browser[j+1])
					}
				}
				resp, err := client.Do(req)
				sent.Add(1)
				if err != nil || resp.StatusCode != want {
					failures.Add(1)
					if err != nil {
						firstFailure.CompareAndSwap(nil, err.Error())
					} else {
						firstFailure.CompareAndSwap(nil, path+": "+resp.Status)
					}
				}
				if resp != nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	compiled := waf.Compilations()
	for i := range 5 {
		// unrelated changes: no rule set compiled
		g.Route("other"+itoa(int64(i)), svc, testgw.Paths("/other"+itoa(int64(i))))
	}
	if n := waf.Compilations(); n != compiled {
		t.Errorf("%d rule sets compiled by changes that left the waf config alone", n-compiled)
	}
	// waf changes: one compilation per distinct config, blocking throughout
	for _, threshold := range []int{5, 4, 5} {
		body := map[string]any{"type": "waf", "scope": "route", "route_id": route, "config": map[string]any{"inbound_anomaly_threshold": threshold}}
		if st, b := g.Do("PUT", "/api/v1/plugins/"+itoa(id), body); st != 200 {
			t.Fatalf("PUT: %d %s", st, b)
		}
	}
	close(stop)
	wg.Wait()
	if n := waf.Compilations() - compiled; n > 1 {
		t.Errorf("%d rule sets compiled for one new config (threshold 4; 5 is the running one)", n)
	}
	if failures.Load() > 0 {
		t.Fatalf("%d of %d requests in flight got the wrong answer (first: %v)", failures.Load(), sent.Load(), firstFailure.Load())
	}
	if sent.Load() < 20 {
		t.Fatalf("only %d requests in flight", sent.Load())
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
