package waf

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

func TestConfig(t *testing.T) {
	plugintest.Config{
		Type: "waf",
		Normalized: [][2]string{
			{`{}`, `{"mode":"block","paranoia_level":1,"inbound_anomaly_threshold":5,"outbound_anomaly_threshold":4,"allowed_methods":["GET","HEAD","POST","OPTIONS","PUT","PATCH","DELETE"],"exclude_rule_ids":[],"request_body_limit":131072,"body_limit_action":"reject","inspect_response":false,"directives":""}`},
			{`{"mode":"detect","paranoia_level":2,"exclude_rule_ids":[942100],"directives":"SecRuleRemoveById 920350"}`,
				`{"mode":"detect","paranoia_level":2,"inbound_anomaly_threshold":5,"outbound_anomaly_threshold":4,"allowed_methods":["GET","HEAD","POST","OPTIONS","PUT","PATCH","DELETE"],"exclude_rule_ids":[942100],"request_body_limit":131072,"body_limit_action":"reject","inspect_response":false,"directives":"SecRuleRemoveById 920350"}`},
		},
		Refused: map[string]string{
			`{"mode":"log"}`:                                              "config.mode",
			`{"paranoia_level":5}`:                                        "config.paranoia_level",
			`{"paranoia_level":0}`:                                        "config.paranoia_level",
			`{"request_body_limit":0}`:                                    "config.request_body_limit",
			`{"request_body_limit":1073741824}`:                           "config.request_body_limit",
			`{"exclude_rule_ids":[0]}`:                                    "config.exclude_rule_ids[0]",
			`{"body_limit_action":"drop"}`:                                "config.body_limit_action",
			`{"directives":"Include /etc/passwd"}`:                        "config.directives: directive Include is not allowed",
			`{"directives":"SecAuditLog /tmp/a.log"}`:                     "config.directives: directive SecAuditLog is not allowed",
			`{"directives":"SecAuditLogStorageDir /tmp"}`:                 "config.directives: directive SecAuditLogStorageDir",
			`{"directives":"SecDebugLog /tmp/d.log"}`:                     "config.directives: directive SecDebugLog is not allowed",
			`{"directives":"SecRemoteRules key https://127.0.0.1/rules"}`: "config.directives: directive SecRemoteRules",
			`{"directives":"SecDataDir /tmp"}`:                            "config.directives: directive SecDataDir",
			`{"directives":"SecRuleEngine Off"}`:                          "config.directives: line 1: directive SecRuleEngine is not allowed: the plugin's mode sets it",
			`{"directives":"# ok\nSecRule ARGS \"@pmFromFile words.txt\" \"id:1001,phase:2,deny\""}`:     "config.directives: line 2: SecRule uses @pmFromFile",
			`{"directives":"SecRule REMOTE_ADDR \"@ipMatchFromFile ips.txt\" \"id:1002,phase:1,deny\""}`: "config.directives: SecRule uses @ipMatchFromFile",
			`{"directives":"SecRule FILES_TMPNAMES \"@inspectFile /bin/sh\" \"id:1003,phase:2,deny\""}`:  "config.directives: SecRule uses @inspectFile",
			`{"directives":"SecRule REMOTE_ADDR \"@rbl bl.example\" \"id:1004,phase:1,deny\""}`:          "config.directives: SecRule uses @rbl",
			`{"directives":"SecAction \\\n  \"id:1005,phase:1,pass,setenv:HOME=/\""}`:                    "config.directives: line 1: SecAction uses setenv",
			`{"directives":"SecRule ARGS \"@rx a(\" \"id:1006,phase:2,deny\""}`:                          "config.directives: ",
			`{"directives":"SecRule ARGS"}`: "config.directives: ",
		},
		Caddyfile: [][2]string{
			{"gateway_waf {\n mode detect\n paranoia_level 2\n exclude_rule_ids 942100 920350\n}",
				`{"body_limit_action":"reject","allowed_methods":["GET","HEAD","POST","OPTIONS","PUT","PATCH","DELETE"],"directives":"","exclude_rule_ids":[942100,920350],"handler":"gateway_waf","inbound_anomaly_threshold":5,"inspect_response":false,"mode":"detect","outbound_anomaly_threshold":4,"paranoia_level":2,"request_body_limit":131072}`},
		},
	}.Check(t)
}

// provisioned is a provisioned waf plugin of config (JSON).
func provisioned(t *testing.T, config string) *WAF {
	t.Helper()
	h := new(WAF)
	h.SetDefaults()
	if err := json.Unmarshal([]byte(config), h); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	return h
}

type upstream struct{ calls int }

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	u.calls++
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "hello")
	return nil
}

func serve(h *WAF, next caddyhttp.Handler, r *http.Request) (*httptest.ResponseRecorder, *gwctx.Info) {
	info := &gwctx.Info{Start: time.Now()}
	r = gwctx.With(r, info)
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, r, next); err != nil {
		w.Code = caddyhttp.HandlerError{}.StatusCode
	}
	return w, info
}

func TestBlocksAndDetects(t *testing.T) {
	block := provisioned(t, `{}`)
	u := &upstream{}
	r := httptest.NewRequest("GET", "/search?q=1%27%20OR%201%3D1--", nil)
	r.Host = "api.test"
	w, info := serve(block, u, r)
	if w.Code != 403 || u.calls != 0 {
		t.Fatalf("status %d, upstream calls %d: want 403 and none", w.Code, u.calls)
	}
	if body := w.Body.String(); !strings.Contains(body, `"error"`) || strings.Contains(body, "942") {
		t.Errorf("body %q", body)
	}
	if info.WAF == nil || info.WAF.Action != "blocked" || info.WAF.AnomalyScore < 5 || len(info.WAF.Rules) == 0 {
		t.Fatalf("record %+v", info.WAF)
	}

	detect := provisioned(t, `{"mode":"detect"}`)
	w, info = serve(detect, u, r)
	if w.Code != 200 || u.calls != 1 {
		t.Fatalf("detect: status %d, upstream calls %d", w.Code, u.calls)
	}
	if info.WAF == nil || info.WAF.Action != "detected" || info.WAF.AnomalyScore < 5 {
		t.Fatalf("detect record %+v", info.WAF)
	}

	clean := httptest.NewRequest("GET", "/users/42?expand=orders", nil)
	clean.Host = "api.test"
	clean.Header.Set("User-Agent", "Mozilla/5.0")
	clean.Header.Set("Accept", "application/json")
	w, info = serve(block, u, clean)
	if w.Code != 200 || info.WAF != nil {
		t.Fatalf("clean request: status %d, record %+v", w.Code, info.WAF)
	}
}

func TestSharedEngine(t *testing.T) {
	a := provisioned(t, `{"paranoia_level":3}`)
	b := provisioned(t, `{"paranoia_level":3}`)
	if a.engine != b.engine {
		t.Fatal("the same config compiled twice")
	}
	c := provisioned(t, `{"paranoia_level":3,"inbound_anomaly_threshold":7}`)
	if c.engine == a.engine {
		t.Fatal("distinct configs share a rule set")
	}
}
