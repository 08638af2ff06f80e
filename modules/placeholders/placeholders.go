// Package placeholders decides which Caddy placeholders a plugin value may
// use. Plugin configs are written by editors, and a value that reaches a
// Caddy replacer can read whatever the replacer can: {file.*} reads any
// file the process can, {env.*} the environment, {system.*} the host. A
// plugin value may only use placeholders of the request it is applied to
// (the allow-list below); anything else is refused when the config is
// validated, by the admin API and by the module's Provision alike (the
// `schema:"placeholders"` tag runs Check).
//
// What counts as a placeholder is what Caddy's replacer would look up: for
// every "{" not escaped as "\{", the text up to the next "}" not escaped
// as "\}". Only texts that look like placeholder names are checked: a
// letter or "_", then letters, digits, "_" or "-", then a "." or the end
// ({env.HOME}, {foo}); other braces, such as a JSON body's
// {"error": "x"}, are literal text to Caddy and to this package. To write
// a placeholder-like text literally, escape its braces: \{env.HOME\}.
package placeholders

import (
	"fmt"
	"strings"
)

// prefixes are the allowed placeholder families: the request's own fields
// (method, host, URI, path, query, headers, cookies, remote address, TLS
// client details, its UUID and duration), except its body.
var prefixes = []string{
	"http.request.",
}

// exact are single allowed placeholders: the variables the gateway sets
// (the client IP after trusted proxies, the request-id plugin's id) and the
// current time.
var exact = map[string]bool{
	"http.vars.client_ip":  true,
	"http.vars.request_id": true,
	"time.now":             true,
	"time.now.http":        true,
	"time.now.rfc3339":     true,
	"time.now.unix":        true,
	"time.now.unix_ms":     true,
	"time.now.common_log":  true,
	"time.now.year":        true,
}

// denied are request placeholders that are not allowed anyway:
// {http.request.body} buffers the whole request body in memory.
var denied = []string{
	"http.request.body",
}

// Allowed reports whether a plugin value may use the placeholder key (the
// text between the braces).
func Allowed(key string) bool {
	if exact[key] {
		return true
	}
	for _, d := range denied {
		if strings.HasPrefix(key, d) {
			return false
		}
	}
	for _, p := range prefixes {
		if strings.HasPrefix(key, p) && len(key) > len(p) {
			return true
		}
	}
	return false
}

// Doc is the rule in one sentence, for the doc tags of fields that allow
// placeholders.
const Doc = "Placeholders of the request are allowed ({http.request.*} except the body, {http.vars.client_ip}, {http.vars.request_id}, {time.now*}); any other placeholder ({env.*}, {file.*}, {system.*} …) is 400; escape braces as \\{ \\} for literal text."

// Check returns an error naming the first placeholder in s that is not
// allowed, or nil.
func Check(s string) error {
	for _, key := range Keys(s) {
		if looksLikePlaceholder(key) && !Allowed(key) {
			return fmt.Errorf("placeholder {%s} is not allowed: only placeholders of the request may be used ({http.request.*}, {http.vars.client_ip}, {http.vars.request_id}, {time.now*})", truncate(key))
		}
	}
	return nil
}

// Keys lists the texts that Caddy's replacer would look up in s, in order:
// for every unescaped "{", the text up to the first unescaped "}" after
// it. Unlike the replacer, which continues after a placeholder it found,
// every "{" is considered, so a placeholder nested in another text is
// listed too (the replacer would expand it when the outer text is not a
// known placeholder).
func Keys(s string) []string {
	var keys []string
	for i := 0; i < len(s); i++ {
		if s[i] != '{' || (i > 0 && s[i-1] == '\\') {
			continue
		}
		rel := strings.IndexByte(s[i:], '}')
		if rel < 0 {
			break // no "}" after this one: none after later ones either
		}
		end := i + rel
		// The first closing brace that is not escaped, as the replacer
		// finds it.
		closed := true
		for end > 0 && end < len(s)-1 && s[end-1] == '\\' {
			next := strings.IndexByte(s[end+1:], '}')
			if next < 0 {
				closed = false
				break
			}
			end += next + 1
		}
		if closed {
			keys = append(keys, s[i+1:end])
		}
	}
	return keys
}

// looksLikePlaceholder reports whether key has the shape of a placeholder
// name: an identifier, then a "." or the end.
func looksLikePlaceholder(key string) bool {
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && (c == '-' || '0' <= c && c <= '9'):
		case i > 0 && c == '.':
			return true
		default:
			return false
		}
	}
	return key != ""
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
