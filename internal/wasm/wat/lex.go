package wat

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// tokKind is the lexical class of a token.
type tokKind uint8

const (
	tEOF    tokKind = iota
	tLParen         // (
	tRParen         // )
	tAtom           // keyword, number or other reserved word: one run of idchars
	tID             // $name
	tString         // "..." (text holds the decoded bytes)
)

// pos is a 1-based line and column (in characters) in the source.
type pos struct{ line, col int32 }

type token struct {
	kind tokKind
	text string // atom or id (with the $) as written; decoded bytes for strings
	pos  pos
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tLParen:
		return "'('"
	case tRParen:
		return "')'"
	case tString:
		return "string"
	}
	return fmt.Sprintf("%q", t.text)
}

// Error is a syntax or validation error at a position in the WAT source.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d:%d: %s", e.Line, e.Col, e.Msg) }

func errAt(p pos, format string, args ...any) *Error {
	return &Error{Line: int(p.line), Col: int(p.col), Msg: fmt.Sprintf(format, args...)}
}

// isIDChar reports whether c may appear in a keyword, number or $name
// (the spec's idchar).
func isIDChar(c byte) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	}
	return strings.IndexByte("!#$%&'*+-./:<=>?@\\^_`|~", c) >= 0
}

// lex splits src into tokens. Comments and white space are dropped.
func lex(src []byte) ([]token, error) {
	// Token texts are substrings of one copy of the source.
	l := lexer{src: src, text: string(src), line: 1, col: 1}
	if strings.HasPrefix(l.text, "\uFEFF") {
		// A byte order mark, as some editors save: not part of the text.
		l.off = 3
	}
	// A rough guess that avoids most regrowth: one token per 4 bytes.
	toks := make([]token, 0, len(src)/4+1)
	for {
		t, err := l.next()
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
		if t.kind == tEOF {
			return toks, nil
		}
	}
}

type lexer struct {
	src       []byte
	text      string // src as a string
	off       int
	line, col int32
}

func (l *lexer) pos() pos { return pos{l.line, l.col} }

// advance moves over n bytes, keeping line and column (in characters).
func (l *lexer) advance(n int) {
	for _, c := range l.src[l.off : l.off+n] {
		switch {
		case c == '\n':
			l.line++
			l.col = 1
		case c&0xC0 != 0x80: // not a UTF-8 continuation byte
			l.col++
		}
	}
	l.off += n
}

func (l *lexer) peekAt(i int) byte {
	if l.off+i < len(l.src) {
		return l.src[l.off+i]
	}
	return 0
}

func (l *lexer) next() (token, error) {
	if err := l.skipSpace(); err != nil {
		return token{}, err
	}
	start := l.pos()
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := l.src[l.off]
	switch {
	case c == '(':
		l.advance(1)
		return token{kind: tLParen, pos: start}, nil
	case c == ')':
		l.advance(1)
		return token{kind: tRParen, pos: start}, nil
	case c == '"':
		s, err := l.str()
		return token{kind: tString, text: s, pos: start}, err
	case isIDChar(c):
		n := 0
		for l.off+n < len(l.src) && isIDChar(l.src[l.off+n]) {
			n++
		}
		text := l.text[l.off : l.off+n]
		l.advance(n)
		if next := l.peekAt(0); next == '"' {
			return token{}, errAt(l.pos(), "unexpected '\"' right after %q (tokens need white space between them)", text)
		}
		if text[0] == '$' {
			if len(text) == 1 {
				return token{}, errAt(start, "empty $name")
			}
			return token{kind: tID, text: text, pos: start}, nil
		}
		return token{kind: tAtom, text: text, pos: start}, nil
	}
	r, _ := utf8.DecodeRune(l.src[l.off:])
	if r == utf8.RuneError {
		return token{}, errAt(start, "invalid UTF-8 in source")
	}
	return token{}, errAt(start, "unexpected character %q", r)
}

// skipSpace skips white space, line comments and (nested) block comments.
func (l *lexer) skipSpace() error {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			l.advance(1)
		case c == ';' && l.peekAt(1) == ';':
			n := 0
			for l.off+n < len(l.src) && l.src[l.off+n] != '\n' {
				n++
			}
			l.advance(n)
		case c == '(' && l.peekAt(1) == ';':
			start := l.pos()
			depth := 0
			for {
				if l.off >= len(l.src) {
					return errAt(start, "unterminated block comment")
				}
				switch {
				case l.src[l.off] == '(' && l.peekAt(1) == ';':
					depth++
					l.advance(2)
				case l.src[l.off] == ';' && l.peekAt(1) == ')':
					depth--
					l.advance(2)
				default:
					l.advance(1)
				}
				if depth == 0 {
					break
				}
			}
		default:
			return nil
		}
	}
	return nil
}

// str lexes a string literal and returns its decoded bytes.
func (l *lexer) str() (string, error) {
	start := l.pos()
	l.advance(1) // opening quote
	var b []byte
	for {
		if l.off >= len(l.src) {
			return "", errAt(start, "unterminated string")
		}
		c := l.src[l.off]
		switch {
		case c == '"':
			l.advance(1)
			return string(b), nil
		case c == '\\':
			p := l.pos()
			e := l.peekAt(1)
			switch e {
			case 't':
				b = append(b, '\t')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case '"', '\'', '\\':
				b = append(b, e)
			case 'u':
				if l.peekAt(2) != '{' {
					return "", errAt(p, `expected '{' after \u`)
				}
				n, v := 3, rune(0)
				for ; isHex(l.peekAt(n)); n++ {
					v = v*16 + rune(hexVal(l.peekAt(n)))
					if v > utf8.MaxRune {
						return "", errAt(p, "\\u escape out of range")
					}
				}
				if n == 3 || l.peekAt(n) != '}' {
					return "", errAt(p, `malformed \u{...} escape`)
				}
				if !utf8.ValidRune(v) {
					return "", errAt(p, "\\u escape is not a Unicode scalar value")
				}
				b = utf8.AppendRune(b, v)
				l.advance(n + 1)
				continue
			default:
				if isHex(e) && isHex(l.peekAt(2)) {
					b = append(b, hexVal(e)<<4|hexVal(l.peekAt(2)))
					l.advance(3)
					continue
				}
				return "", errAt(p, "unknown escape in string (use \\t \\n \\r \\\" \\' \\\\ \\hh or \\u{hex})")
			}
			l.advance(2)
		case c < 0x20 || c == 0x7f:
			return "", errAt(l.pos(), "control character in string (use an escape such as \\n or \\hh)")
		case c < 0x80:
			b = append(b, c)
			l.advance(1)
		default:
			r, n := utf8.DecodeRune(l.src[l.off:])
			if r == utf8.RuneError && n <= 1 {
				return "", errAt(l.pos(), "invalid UTF-8 in string (use \\hh escapes for raw bytes)")
			}
			b = append(b, l.src[l.off:l.off+n]...)
			l.advance(n)
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
