package schema

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// invalidText names the first string of body (a JSON document) that
// encoding/json would not decode as written: invalid UTF-8 or an unpaired
// surrogate escape (\ud800), which the decoder silently turns into U+FFFD.
// A stored name, key or password would then differ from what the client
// sent, and two different inputs would be stored as the same value.
// Malformed JSON is left to the decoder (ok false).
func invalidText(body []byte) (path string, ok bool) {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u`)) {
		return "", false // the usual input: nothing to replace
	}
	type level struct {
		path    string
		array   bool
		n       int    // arrays: the index of the next element
		key     string // objects: the key of the value being read
		wantKey bool
	}
	var stack []*level
	at := func() string { // the path of the value being read
		if len(stack) == 0 {
			return ""
		}
		l := stack[len(stack)-1]
		if l.array {
			return l.path + "[" + strconv.Itoa(l.n) + "]"
		}
		return joinPath(l.path, l.key)
	}
	done := func() { // a value of the innermost container is complete
		if len(stack) == 0 {
			return
		}
		if l := stack[len(stack)-1]; l.array {
			l.n++
		} else {
			l.wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var prev int64
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		end := dec.InputOffset()
		raw := body[prev:end] // the token, after the separators before it
		prev = end
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				stack = append(stack, &level{path: at(), array: t == '[', wantKey: t == '{'})
				continue
			}
			stack = stack[:len(stack)-1]
			done()
			continue
		case string:
			isKey := len(stack) > 0 && stack[len(stack)-1].wantKey
			if isKey {
				l := stack[len(stack)-1]
				l.key, l.wantKey = t, false
			}
			if badText(raw) {
				return at(), true
			}
			if isKey {
				continue
			}
		}
		done()
	}
}

// badText reports whether raw (a string token as written, with the
// separators before it) holds invalid UTF-8 or an unpaired surrogate
// escape.
func badText(raw []byte) bool {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return true
			}
			i += size
			continue
		}
		if c != '\\' || i+1 >= len(raw) {
			i++
			continue
		}
		if raw[i+1] != 'u' {
			i += 2 // \" \\ \/ \b \f \n \r \t
			continue
		}
		r, ok := hex4(raw, i+2)
		if !ok {
			return false // malformed: the decoder says so
		}
		i += 6
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true // a low surrogate alone
		case r >= 0xD800 && r <= 0xDBFF:
			if i+1 >= len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
				return true
			}
			if lo, ok := hex4(raw, i+2); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 reads the four hex digits of a \u escape at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[i:i+4]), 16, 32)
	return rune(n), err == nil
}
