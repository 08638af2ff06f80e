package schema

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The walk of an input before it is decoded (checkObject, checkRaw) reads
// its arrays and objects in place, with the functions below, instead of
// unmarshalling each into a slice or a map of json.RawMessage: an array of
// five million one-character strings (a 20 MiB body) became five million
// copies and a 120 MB slice before its count was checked, and again a
// five-million-item Go slice before Check refused it. They need valid
// JSON (Decode checks the body with json.Valid first).

// eachItem calls fn with every element of the JSON array raw, in order,
// and stops at the first error.
func eachItem(raw []byte, fn func(i int, v []byte) error) error {
	i := skipSpace(raw, 1) // past '['
	for n := 0; i < len(raw) && raw[i] != ']'; n++ {
		end := skipValue(raw, i)
		if err := fn(n, raw[i:end]); err != nil {
			return err
		}
		i = next(raw, end)
	}
	return nil
}

// eachMember calls fn with every member of the JSON object raw, in order
// (a key given twice: twice), and stops at the first error.
func eachMember(raw []byte, fn func(key string, v []byte) error) error {
	i := skipSpace(raw, 1) // past '{'
	for i < len(raw) && raw[i] != '}' {
		kEnd := skipString(raw, i)
		key, err := unquote(raw[i:kEnd])
		if err != nil { // not with valid JSON; a 400 all the same
			return &FieldError{Msg: "malformed JSON: " + jsonErrText(err)}
		}
		i = skipSpace(raw, kEnd)
		i = skipSpace(raw, i+1) // past ':'
		end := skipValue(raw, i)
		if err := fn(key, raw[i:end]); err != nil {
			return err
		}
		i = next(raw, end)
	}
	return nil
}

// next is where the element or member after the one ending at end starts
// (past the comma), or the closing bracket's index.
func next(raw []byte, end int) int {
	i := skipSpace(raw, end)
	if i < len(raw) && raw[i] == ',' {
		i = skipSpace(raw, i+1)
	}
	return i
}

// countItems is the number of elements of the JSON array raw, or of the
// distinct keys of the JSON object raw (as a Go map decodes it), counted
// up to limit+1: enough to refuse it without reading the rest.
func countItems(raw []byte, limit int) int {
	n := 0
	if raw[0] == '[' {
		_ = eachItem(raw, func(int, []byte) error {
			n++
			if n > limit {
				return errStop
			}
			return nil
		})
		return n
	}
	seen := map[string]bool{}
	_ = eachMember(raw, func(k string, _ []byte) error {
		seen[k] = true
		if len(seen) > limit {
			return errStop
		}
		return nil
	})
	return len(seen)
}

var errStop = &FieldError{Msg: "stop"}

// unquote decodes a JSON string token (a key) as encoding/json does
// (invalid UTF-8 becomes U+FFFD).
func unquote(tok []byte) (string, error) {
	if bytes.IndexByte(tok, '\\') < 0 && utf8.Valid(tok) {
		return string(tok[1 : len(tok)-1]), nil
	}
	var s string
	err := json.Unmarshal(tok, &s)
	return s, err
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index past the JSON string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index past the JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
