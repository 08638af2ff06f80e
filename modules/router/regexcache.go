package router

import (
	"regexp"
	"strings"
	"sync"

	"github.com/caddy-gateway/gateway/internal/pathexpr"
)

// Compiled path regexes are reused from one table to the next: every
// configuration change builds a new table from every route, and compiling
// each route's regex again made a change cost grow with the number of
// regex routes. The cache holds the expressions of the last table built
// (plus those being added by a build in progress), so it never grows
// beyond the live configuration. It also shares the compiled rest of
// expressions that differ only in their literal head (pathexpr.Split).
var regexes = &regexCache{cur: map[regexKey]pathRegex{}}

type regexCache struct {
	mu   sync.Mutex
	cur  map[regexKey]pathRegex // the last finished build's expressions
	next map[regexKey]pathRegex // the build in progress
}

// regexKey is a path expression, or the rest of split expressions.
type regexKey struct {
	expr string
	rest bool
}

// begin starts a table build.
func (c *regexCache) begin() {
	c.mu.Lock()
	c.next = make(map[regexKey]pathRegex, len(c.cur))
	c.mu.Unlock()
}

// get returns the compiled form of a path expression (without its "~").
func (c *regexCache) get(expr string) (pathRegex, error) {
	return c.lookup(regexKey{expr: expr}, compilePathRegex)
}

// lookup returns the cached entry under key, compiling it with compile
// when the cache does not have it.
func (c *regexCache) lookup(key regexKey, compile func(string) (pathRegex, error)) (pathRegex, error) {
	c.mu.Lock()
	pr, ok := c.cur[key]
	if !ok {
		pr, ok = c.next[key]
	}
	c.mu.Unlock()
	if !ok {
		var err error
		if pr, err = compile(key.expr); err != nil {
			return pathRegex{}, err
		}
	}
	c.mu.Lock()
	if c.next != nil {
		c.next[key] = pr
	}
	c.mu.Unlock()
	return pr, nil
}

// end finishes a build: its expressions become the cache.
func (c *regexCache) end() {
	c.mu.Lock()
	if c.next != nil {
		c.cur, c.next = c.next, nil
	}
	c.mu.Unlock()
}

// compilePathRegex compiles a path expression anchored at the start of the
// path, with the literal prefix every match starts with. An expression
// that splits into a literal head and a rest is kept as the head and the
// shared compiled rest.
func compilePathRegex(expr string) (pathRegex, error) {
	re, prefix, err := pathexpr.Compile(expr) // validates expr
	if err != nil {
		return pathRegex{}, err
	}
	pr := pathRegex{re: re, prefix: prefix, need: pathexpr.Required(expr)}
	if head, rest, ok := pathexpr.Split(expr); ok {
		shared, err := regexes.lookup(regexKey{expr: rest, rest: true}, func(rest string) (pathRegex, error) {
			re, err := regexp.Compile("^(?:" + rest + ")")
			return pathRegex{re: re}, err
		})
		if err == nil {
			pr.re, pr.prefix, pr.split = shared.re, head, true
		}
	}
	return pr, nil
}

// match returns the length of the portion of path that pr matches, or -1.
func (pr *pathRegex) match(path string) int {
	if !pr.split {
		if loc := pr.re.FindStringIndex(path); loc != nil {
			return loc[1] // anchored: loc[0] is 0
		}
		return -1
	}
	if !strings.HasPrefix(path, pr.prefix) {
		return -1
	}
	if loc := pr.re.FindStringIndex(path[len(pr.prefix):]); loc != nil {
		return len(pr.prefix) + loc[1]
	}
	return -1
}
