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

	"github.com/caddyserver/caddy/v2"
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

// Expand is repl.ReplaceKnown(s, ""), Caddy's expansion of s (known
// placeholders replaced, unknown ones left as they are, \{ and \} made
// literal braces), unless the result would be longer than limit bytes:
// then it returns "" and false without having built anything. Caddy's
// replacer builds its result before anyone can look at its length, and a
// value that repeats a placeholder of a client's field expands to that
// field times the repetitions: 300 copies of {http.request.header.X} in an
// 8 KB value and a 1 MB header make 300 MB for one request. Expand looks
// each placeholder up once, as the replacer does, adds up the lengths of
// the pieces, and gives up at the first one past the limit.
//
// The scan is the replacer's own (caddy.Replacer.replace), step for step,
// so that the result is the same for every input: whether a placeholder is
// known is the replacer's answer at request time, and after an unknown one
// the scan goes on from the character after its "{", as the replacer's
// does.
func Expand(repl *caddy.Replacer, s string, limit int) (string, bool) {
	if !strings.ContainsAny(s, "{}") {
		// what the replacer returns as it is
		if len(s) > limit {
			return "", false
		}
		return s, true
	}
	// The output is pieces of s and looked-up values, concatenated at the
	// end; the array keeps the common short value off the heap.
	var arr [16]string
	pieces := arr[:0]
	n, last, unclosed := 0, 0, 0
scan:
	for i := 0; i < len(s); i++ {
		if i > 0 && s[i-1] == '\\' && (s[i] == '{' || s[i] == '}') {
			// an escaped brace: drop the backslash
			pieces = append(pieces, s[last:i-1])
			n += i - 1 - last
			last = i
			continue
		}
		if s[i] != '{' {
			continue
		}
		if unclosed > 100 {
			// The replacer gives up on such input with an error, which
			// ReplaceKnown turns into "".
			return "", true
		}
		end := strings.IndexByte(s[i:], '}') + i
		if end < i {
			unclosed++
			continue
		}
		// the first closing brace that is not escaped
		for end > 0 && end < len(s)-1 && s[end-1] == '\\' {
			next := strings.IndexByte(s[end+1:], '}')
			if next < 0 {
				unclosed++
				continue scan
			}
			end += next + 1
		}
		val, found := repl.Get(s[i+1 : end])
		if !found {
			continue // left as it is: s[last:] still holds it
		}
		v := caddy.ToString(val)
		pieces = append(pieces, s[last:i], v)
		n += i - last + len(v)
		if n > limit {
			return "", false
		}
		i, last = end, end+1
	}
	n += len(s) - last
	if n > limit {
		return "", false
	}
	switch {
	case len(pieces) == 0:
		return s[last:], true
	case last == len(s) && n == len(pieces[len(pieces)-1]):
		return pieces[len(pieces)-1], true // a value alone: no copy
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range pieces {
		b.WriteString(p)
	}
	b.WriteString(s[last:])
	return b.String(), true
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

// EscapeDenied returns s with the braces of every placeholder that is not
// allowed escaped (\{env.HOME\}), so that it is literal text; s is
// returned as is when that does not make it pass Check. It is for values
// stored before the rule (an upgraded store), never for input.
func EscapeDenied(s string) string {
	out := s
	for _, key := range Keys(s) {
		if looksLikePlaceholder(key) && !Allowed(key) {
			out = strings.ReplaceAll(out, "{"+key+"}", `\{`+key+`\}`)
		}
	}
	if Check(out) != nil {
		return s
	}
	return out
}
