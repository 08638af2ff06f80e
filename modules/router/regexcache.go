package router

import (
	"sync"

	"github.com/caddy-gateway/gateway/modules/router/pathexpr"
)

// Compiled path regexes are reused from one table to the next: every
// configuration change builds a new table from every route, and compiling
// each route's regex again made a change cost grow with the number of
// regex routes. The cache holds the expressions of the last table built
// (plus those being added by a build in progress), so it never grows
// beyond the live configuration.
var regexes = &regexCache{cur: map[string]pathRegex{}}

type regexCache struct {
	mu   sync.Mutex
	cur  map[string]pathRegex // the last finished build's expressions
	next map[string]pathRegex // the build in progress
}

// begin starts a table build.
func (c *regexCache) begin() {
	c.mu.Lock()
	c.next = make(map[string]pathRegex, len(c.cur))
	c.mu.Unlock()
}

// get returns the compiled form of a path expression (without its "~").
func (c *regexCache) get(expr string) (pathRegex, error) {
	c.mu.Lock()
	pr, ok := c.cur[expr]
	if !ok {
		pr, ok = c.next[expr]
	}
	c.mu.Unlock()
	if !ok {
		var err error
		if pr, err = compilePathRegex(expr); err != nil {
			return pathRegex{}, err
		}
	}
	c.mu.Lock()
	if c.next != nil {
		c.next[expr] = pr
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
// path, with the literal prefix every match starts with.
func compilePathRegex(expr string) (pathRegex, error) {
	re, prefix, err := pathexpr.Compile(expr)
	if err != nil {
		return pathRegex{}, err
	}
	return pathRegex{re: re, prefix: prefix}, nil
}
