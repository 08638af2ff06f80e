// Package pathexpr is the router's path pattern language (docs/routing.md):
// a literal prefix starting with "/" or "~" followed by an RE2 expression
// anchored at the start of the path. The router compiles patterns with
// Compile, and the admin API validates them with Validate, so a pattern the
// API accepts is one the router loads.
package pathexpr

import (
	"errors"
	"regexp"
	"strings"
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
func Validate(pattern string) error {
	if expr, ok := strings.CutPrefix(pattern, "~"); ok {
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
