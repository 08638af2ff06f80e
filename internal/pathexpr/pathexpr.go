// Package pathexpr is the router's path pattern language (docs/routing.md):
// a literal prefix starting with "/" or "~" followed by an RE2 expression
// anchored at the start of the path. The router compiles patterns with
// Compile, and the admin API validates them with Validate, so a pattern the
// API accepts is one the router loads.
package pathexpr

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/caddy-gateway/gateway/internal/regexsize"
)

// Compile compiles a path expression (without its "~") anchored at the
// start of the path, and returns the literal prefix every match starts
// with.
func Compile(expr string) (re *regexp.Regexp, prefix string, err error) {
	// Compile the bare expression first: it validates it on its own (so
	// "a)(b" cannot sneak through the wrapping below, where it would read
	// as "^(?:a)(b)"), and its LiteralPrefix is the literal prefix of every
	// match; the anchored form hides that prefix from LiteralPrefix
	// although both match the same language.
	bare, err := regexp.Compile(expr)
	if err != nil {
		return nil, "", err
	}
	re, err = regexp.Compile("^(?:" + expr + ")")
	if err != nil {
		return nil, "", err
	}
	prefix, _ = bare.LiteralPrefix()
	return re, prefix, nil
}

// Validate checks a route path pattern: a literal prefix ("/…") or
// "~regex". Its errors are phrased for an API answer naming the field.
// An expression whose program would exceed regexsize.MaxProgram
// instructions is refused before anything is compiled. That bound is the
// API's (and import's) only: the router compiles what the store holds, so
// a store written before the bound still loads after an upgrade (leaving
// such a route out would send its traffic to a less specific route,
// without its plugins).
func Validate(pattern string) error {
	if expr, ok := strings.CutPrefix(pattern, "~"); ok {
		if err := regexsize.Check(expr); err != nil {
			return errors.New("invalid regular expression: " + err.Error())
		}
		if _, _, err := Compile(expr); err != nil {
			return errors.New("invalid regular expression: " + err.Error())
		}
		return nil
	}
	if !strings.HasPrefix(pattern, "/") {
		return errors.New("must start with / (literal prefix) or ~ (regular expression)")
	}
	return nil
}

// Split divides a path expression into a literal head and the rest, such
// that the expression matches a path (anchored at its start) exactly when
// the path starts with head and rest matches what follows head (anchored
// there), with the same matched text. Routes generated from a template
// ("/tenant1/[0-9]+/items", "/tenant2/[0-9]+/items", …) then share one
// compiled rest: one program in memory, warm in the cache, instead of one
// per route. ok is false when the expression does not start with a
// case-sensitive literal, or when its rest looks at what precedes it (^,
// \A, \b, \B: the context that matching the rest alone would lose).
func Split(expr string) (head, rest string, ok bool) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat || len(re.Sub) < 2 {
		return "", "", false
	}
	first := re.Sub[0]
	if !plainLiteral(first) {
		return "", "", false
	}
	tail := re.Sub[1:]
	for _, sub := range tail {
		if looksBack(sub) {
			return "", "", false
		}
	}
	r := tail[0]
	if len(tail) > 1 {
		r = &syntax.Regexp{Op: syntax.OpConcat, Sub: tail}
	}
	rest = r.String()
	// The printed form must parse back into the same expression.
	if back, err := syntax.Parse(rest, syntax.Perl); err != nil || !back.Equal(r) {
		return "", "", false
	}
	return string(first.Rune), rest, true
}

// looksBack reports whether re has an assertion about the text before the
// position it is tried at.
func looksBack(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpBeginText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	for _, sub := range re.Sub {
		if looksBack(sub) {
			return true
		}
	}
	return false
}

// Required returns the longest case-sensitive literal, other than the
// expression's leading one, that every match contains ("" when there is
// none), so that a path lacking it is ruled out without running the
// expression: "/[a-z]+/legacy" needs "/legacy".
func Required(expr string) string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return ""
	}
	var best string
	var walk func(re *syntax.Regexp, leading bool)
	walk = func(re *syntax.Regexp, leading bool) {
		switch re.Op {
		case syntax.OpLiteral:
			if s := string(re.Rune); !leading && plainLiteral(re) && len(s) > len(best) {
				best = s
			}
		case syntax.OpCapture:
			walk(re.Sub[0], leading)
		case syntax.OpConcat:
			// Every element of a concatenation is part of every match.
			for i, sub := range re.Sub {
				walk(sub, leading && i == 0)
			}
		}
	}
	walk(re, true)
	return best
}

// plainLiteral reports whether re is a literal that matches exactly its
// UTF-8 bytes: not case-folded, and without U+FFFD, which the regexp
// package also matches against an invalid byte.
func plainLiteral(re *syntax.Regexp) bool {
	return re.Op == syntax.OpLiteral && re.Flags&syntax.FoldCase == 0 && !slices.Contains(re.Rune, utf8.RuneError)
}
