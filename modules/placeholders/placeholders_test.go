package placeholders

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{
		"", "plain", "{http.request.remote.host}", "{http.request.header.X-Id}",
		"{http.request.uri.query.q}-{http.vars.request_id}", "{http.vars.client_ip}",
		"{time.now.rfc3339}", `{"error":"maintenance"}`, `{"a":{"b":1}}`, "{ env.HOME}",
		`\{env.HOME\}`, "{unclosed", "}{", `{"k": "{http.request.method}"}`,
	} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{
		"{env.HOME}", "{file./etc/passwd}", "{system.hostname}", "{foo}", "x{env.A}y",
		"{http.request.body}", "{http.request.body_base64}", "{http.vars.other}",
		"{http.reverse_proxy.upstream.hostport}", `{"a{env.HOME}"}`,
		"{http.request.header.{file./etc/passwd}}", `{env.A\}}`, "{not.a.placeholder}",
		"{time.now.unix_ms}{tls.client.subject}",
	} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%q) accepted", bad)
		}
	}
	if err := Check("{env.SECRET}"); err == nil || !strings.Contains(err.Error(), "{env.SECRET}") {
		t.Errorf("error does not name the placeholder: %v", err)
	}
}

// FuzzCheck compares Check with Caddy's own replacer: whenever Check
// accepts a value, expanding it never looks up a placeholder-like name
// outside the allow-list (allowed names are "found", others are not, as
// a real replacer might answer).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"{http.request.uri.path}", "{env.HOME}", `\{env.HOME\}`, `{"a":{"b":"{file./x}"}}`,
		"{http.request.header.{env.X}}", `{a\}{env.X}`, "{{env.X}}", `{\{env.X\}}`, "{", "}",
		`{http.request.method\}x}`, `\\{env.X}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := Check(s)
		var leaked string
		repl := caddy.NewEmptyReplacer()
		repl.Map(func(key string) (any, bool) {
			if looksLikePlaceholder(key) && !Allowed(key) && leaked == "" {
				leaked = key
			}
			return "v", Allowed(key)
		})
		_ = repl.ReplaceKnown(s, "")
		_ = repl.ReplaceAll(s, "")
		if err == nil && leaked != "" {
			t.Fatalf("Check(%q) accepted a value whose expansion looks up {%s}", s, leaked)
		}
	})
}
