package schema

import (
	"strconv"
	"unicode/utf8"
)

// invalidText names the first string of body (a JSON document) that
// encoding/json would not decode as written: invalid UTF-8 or an unpaired
// surrogate escape (\ud800), which the decoder silently turns into U+FFFD.
// A stored name, key or password would then differ from what the client
// sent, and two different inputs would be stored as the same value.
// body must be valid JSON (json.Valid). Neither the check nor the search
// for the path allocates per token: with encoding/json's tokenizer, a
// 20 MiB body of tiny escaped strings cost a second of CPU and 350 MB of
// garbage.
func invalidText(body []byte) (path string, ok bool) {
	off := badText(body)
	if off < 0 {
		return "", false // outside strings valid JSON has neither escapes nor non-ASCII bytes
	}
	return pathAt(body, off), true
}

// pathAt is the path of the innermost value or key of body (a valid JSON
// value) that holds the byte at offset off, found in one pass over
// body[:off] with a stack of the arrays and objects around it. Descending
// level by level (eachMember, eachItem) skipped the whole enclosing value
// at every level: a body nested thousands deep with the byte at its bottom
// cost its size times its depth (a 64 KiB body 0.6 s, 2 MiB 20 s).
func pathAt(body []byte, off int) string {
	type frame struct {
		obj     bool
		wantKey bool   // an object: the next string is a key
		key     []byte // an object: its current key, as written
		index   int    // an array: its current item
	}
	var stack []frame
scan:
	for i := 0; i < off; {
		top := len(stack) - 1
		switch body[i] {
		case '"':
			end := skipString(body, i)
			if top >= 0 && stack[top].wantKey {
				stack[top].key, stack[top].wantKey = body[i:end], false
			}
			if off < end {
				break scan // the byte is in this string
			}
			i = end
			continue
		case '{':
			stack = append(stack, frame{obj: true, wantKey: true})
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			stack = stack[:top]
		case ',':
			if stack[top].obj {
				stack[top].key, stack[top].wantKey = nil, true
			} else {
				stack[top].index++
			}
		}
		i++
	}
	var path []byte
	for _, f := range stack {
		if !f.obj {
			path = append(path, '[')
			path = strconv.AppendInt(path, int64(f.index), 10)
			path = append(path, ']')
			continue
		}
		if f.key == nil {
			break // not past the key yet (off is never there: it is in a string)
		}
		k, _ := unquote(f.key)
		if len(path) > 0 {
			path = append(path, '.')
		}
		path = append(path, k...)
	}
	return string(path)
}

// badText is the offset of the first invalid UTF-8 byte or unpaired
// surrogate escape of raw (JSON as written), or -1.
func badText(raw []byte) int {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return i
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
			return -1 // malformed: the decoder says so
		}
		at := i
		i += 6
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return at // a low surrogate alone
		case r >= 0xD800 && r <= 0xDBFF:
			if i+1 >= len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
				return at
			}
			if lo, ok := hex4(raw, i+2); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return at
			}
			i += 6
		}
	}
	return -1
}

// hex4 reads the four hex digits of a \u escape at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
