package placeholders

import (
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/internal/memtest"
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

// FuzzExpand compares Expand with Caddy's replacer: with a limit it does
// not reach, Expand's result is ReplaceKnown's, byte for byte; with a
// limit one byte short of that result it refuses. Keys of the form k<n>
// are known (with values of n bytes, some empty), others are not.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{
		"", "plain", "{k3}", "a{k3}b{k0}c", "{x}{k2}", `\{k3\}`, `\\{k3}`, `{k3\}}`, `{k3\}`,
		"{a{k2}}", "{{k2}}", `{k2\}x}y}`, "{", "}", "}{", "{k1", `{"a": 1}`, `x\y`,
		strings.Repeat("{", 120) + "{k2}", strings.Repeat("{unclosed ", 102) + "{k1}",
		strings.Repeat("{k5}", 50), `{k2}\`, `\`, `{k2}\}`, `\{\}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		repl := caddy.NewEmptyReplacer()
		repl.Map(func(key string) (any, bool) {
			if n, err := strconv.Atoi(strings.TrimPrefix(key, "k")); err == nil && strings.HasPrefix(key, "k") && n >= 0 && n < 100 {
				return strings.Repeat("v", n), true
			}
			return nil, false
		})
		want := repl.ReplaceKnown(s, "")
		got, ok := Expand(repl, s, len(want))
		if !ok || got != want {
			t.Fatalf("Expand(%q, %d) = %q, %v; ReplaceKnown: %q", s, len(want), got, ok, want)
		}
		if len(want) > 0 {
			if got, ok := Expand(repl, s, len(want)-1); ok || got != "" {
				t.Fatalf("Expand(%q, %d) = %q, %v: past the limit", s, len(want)-1, got, ok)
			}
		}
	})
}

// TestExpandStopsAtTheLimit: a value repeating a placeholder of a large
// field costs at most the limit (and the field), not the field times the
// repetitions.
func TestExpandStopsAtTheLimit(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	repl := caddy.NewEmptyReplacer()
	repl.Set("http.request.header.X-Big", big)
	s := strings.Repeat("{http.request.header.X-Big}", 300)
	allocs := testing.AllocsPerRun(10, func() {
		if v, ok := Expand(repl, s, 64<<10); ok || v != "" {
			t.Fatalf("expanded to %d bytes", len(v))
		}
	})
	if allocs > 0 {
		t.Errorf("%v allocations to refuse", allocs)
	}
	var v string
	var ok bool
	got := memtest.Allocated(func() { v, ok = Expand(repl, "<{http.request.header.X-Big}>", 2<<20) })
	if !ok || len(v) != len(big)+2 {
		t.Fatalf("expanded to %d bytes, %v", len(v), ok)
	}
	if got > uint64(len(v))*17/16 { // the allocator's rounding
		t.Errorf("%d bytes allocated for a %d-byte result", got, len(v))
	}
}

func TestEscapeDenied(t *testing.T) {
	for in, want := range map[string]string{
		"Bearer {env.TOKEN}":                       `Bearer \{env.TOKEN\}`,
		"{http.request.host} on {system.hostname}": `{http.request.host} on \{system.hostname\}`,
		"{file./etc/passwd}{env.A}":                `\{file./etc/passwd\}\{env.A\}`,
		"plain {http.vars.client_ip}":              "plain {http.vars.client_ip}",
		`\{env.X\}`:                                `\{env.X\}`,
	} {
		got := EscapeDenied(in)
		if got != want || Check(got) != nil {
			t.Errorf("EscapeDenied(%q) = %q (check %v), want %q", in, got, Check(got), want)
		}
		repl := caddy.NewReplacer()
		if exp, _ := Expand(repl, got, 1<<20); in != want && strings.Contains(exp, `\`) {
			t.Errorf("%q expands to %q", got, exp)
		}
	}
}
