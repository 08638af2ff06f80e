package router

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// Table is the route matching index of the gateway_router handler
// (docs/routing.md). Build it once per config load with
// NewTable; it is read-only afterwards and safe for concurrent use.
//
// Routes are grouped into host buckets: one per exact host, one per wildcard
// suffix and one for routes without hosts. A request visits at most one
// exact bucket, one wildcard bucket per dot in its host and the no-host
// bucket, so the number of routes never enters the lookup cost. Inside a
// bucket, literal path prefixes live in a radix tree that is walked once
// along the request path; regex entries hang off the tree node of their
// literal prefix (regexp.LiteralPrefix), so only regexes that can possibly
// match the path are run, and only when they could still beat the best
// match found so far.
//
// With thousands of routes, matching time is dominated by cache misses, not
// by comparisons, so the layout avoids pointer hops: buckets are stored by
// value in the host maps, each bucket's tree is one slice of nodes whose
// labels point into one string, and the candidates carry the fields needed
// to rank them.
type Table struct {
	// entries are the routes, sorted by id (lookups by id, Explain).
	entries []*entry
	exact   hostIndex // normalized host → bucket
	wild    hostIndex // ".example.com" for "*.example.com" → bucket
	any     bucket    // routes without hosts; empty when there are none
	// wildMaxPriority bounds every wildcard bucket, so that a request whose
	// exact-host match already beats them all skips the suffix lookups. An
	// update (With) only ever raises it: a bound above the real maximum
	// prunes less but is still correct.
	wildMaxPriority int32
	// wildDots has bit d set when some wildcard key has d dots (63: 63 or
	// more), so that the suffixes of a request host no key can equal are
	// not looked up: with thousands of wildcard routes each lookup is a
	// cache miss, and "a.b.t1.example.net" would otherwise cost four. Like
	// wildMaxPriority, an update only adds bits.
	wildDots uint64
	// services counts the routes referencing each service (as service_id
	// or in splits); primaries counts them by service_id only.
	services  map[int64]int32
	primaries map[int64]int32
}

// hostClass orders the kinds of host match, most specific last.
type hostClass uint8

const (
	hostNone hostClass = iota
	hostWildcard
	hostExact
)

// bucket holds the routes reachable through one host key. It is kept small
// (under 128 bytes) so that Go maps store it inline, next to its key.
type bucket struct {
	class       hostClass
	hasRegex    bool
	maxPriority int32
	// suffixLen is the length of the wildcard suffix (".example.com") for
	// wildcard buckets, 0 otherwise.
	suffixLen int
	// nodes is the radix tree over literal path prefixes; nodes[0] is the
	// root and the children of a node are contiguous. Empty for an unused
	// bucket.
	nodes   []node
	literal []cand      // every node's literal candidates, by node
	regex   []regexCand // every node's regex candidates, by node
}

// node is a radix tree node. The root's label is empty; a route with no
// paths sits among the root's literal candidates because it matches every
// path with an empty matched portion.
type node struct {
	label   string
	indices string // first byte of each child's label, in child order
	child   int32  // index of the first child in bucket.nodes
	// literal[lit:litEnd] are the routes with a literal path entry spelling
	// exactly the path from the root to this node; regex[re:reEnd] are the
	// regex entries whose literal prefix does. Both ranges are sorted by
	// candOrder, so the first candidate that satisfies its conditions is the
	// best of its range.
	lit, litEnd int32
	re, reEnd   int32
}

// cand is a route as stored in a bucket. The ranking fields and the common
// method condition are copied out of the entry so that a candidate can be
// ranked, pruned and usually accepted without touching other memory.
type cand struct {
	e        *entry
	id       int64
	priority int32
	conds    int32
	// methods is a mask of methodBit values when every method the route
	// lists is a standard one, 0 when the route lists none or a custom one.
	methods uint16
	// slow is set when the entry itself must be consulted: header
	// conditions, or methods the mask cannot express.
	slow bool
}

type regexCand struct {
	cand
	re *regexp.Regexp // compiled as ^(?:re)
}

// entry is a route compiled for matching. It keeps little beside the
// route: at 50,000 routes every word of it is 400 KB. The host keys and
// literal paths are read from the route when needed (building or
// updating buckets, Explain), and what few routes have sits behind x.
type entry struct {
	// route is the entry's own copy, so that the *Route handed out by
	// Match stays valid and unchanged whatever the caller does with the
	// slice the table was built from.
	route    Route
	priority int32
	conds    int32 // (1 if methods) + number of header conditions
	// x is nil for a route without methods, headers, regex paths or
	// splits.
	x *entryExtra
}

type entryExtra struct {
	methods []string // upper-cased
	headers []headerCond
	regexes []pathRegex
	// splits are the cumulative weights of route.Splits (pickService).
	splits []int64
	total  int64
}

func (e *entry) extra() *entryExtra {
	if e.x == nil {
		e.x = &entryExtra{}
	}
	return e.x
}

func (e *entry) methods() []string {
	if e.x == nil {
		return nil
	}
	return e.x.methods
}

func (e *entry) headers() []headerCond {
	if e.x == nil {
		return nil
	}
	return e.x.headers
}

func (e *entry) regexes() []pathRegex {
	if e.x == nil {
		return nil
	}
	return e.x.regexes
}

// hasHosts reports whether the route lists hosts (else it sits in the
// no-host bucket).
func (e *entry) hasHosts() bool { return len(e.route.Hosts) > 0 }

// eachHost calls fn with the index key of every host of the route: the
// normalized host for an exact one, the lower-cased suffix with its dot
// (".example.com") for a wildcard "*.example.com". The dot stays so that
// a suffix lookup on "a.example.com" cannot hit "*.example.com" via the
// bare domain.
func (e *entry) eachHost(fn func(key string, wild bool)) {
	for _, h := range e.route.Hosts {
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			fn("."+strings.ToLower(suffix), true)
			continue
		}
		// Route hosts go through the same normalization as request
		// hosts, so a stray port or bracketed IPv6 literal still matches.
		fn(normalizeHost(h), false)
	}
}

// dotsBit is key's bit in Table.wildDots.
func dotsBit(key string) uint64 { return 1 << min(strings.Count(key, "."), 63) }

// hasHostKey reports whether key is one of the route's index keys.
func (e *entry) hasHostKey(key string, wild bool) bool {
	found := false
	e.eachHost(func(k string, w bool) { found = found || (k == key && w == wild) })
	return found
}

// pathRegex is a "~re" path entry.
type pathRegex struct {
	re *regexp.Regexp // compiled as ^(?:re)
	// prefix is a literal every match starts with; it places the entry in
	// the radix tree.
	prefix string
}

type headerCond struct {
	name  string // canonical, like the keys net/http gives
	value string
	any   bool // the value "*": present with any value, even empty
}

// methodBit numbers the standard methods, for cand.methods. It is
// case-sensitive on purpose: it is a fast path, and a lower-case request
// method (0 here) takes the slow, case-insensitive one.
func methodBit(method string) uint16 {
	switch method {
	case http.MethodGet:
		return 1 << 0
	case http.MethodHead:
		return 1 << 1
	case http.MethodPost:
		return 1 << 2
	case http.MethodPut:
		return 1 << 3
	case http.MethodPatch:
		return 1 << 4
	case http.MethodDelete:
		return 1 << 5
	case http.MethodOptions:
		return 1 << 6
	case http.MethodConnect:
		return 1 << 7
	case http.MethodTrace:
		return 1 << 8
	}
	return 0
}

func (e *entry) cand() cand {
	c := cand{e: e, id: e.route.ID, priority: e.priority, conds: e.conds}
	for _, m := range e.methods() {
		bit := methodBit(m)
		if bit == 0 {
			c.methods, c.slow = 0, true
			break
		}
		c.methods |= bit
	}
	if len(e.headers()) > 0 {
		c.slow = true
	}
	return c
}

// rank orders candidate matches; see beats.
type rank struct {
	priority  int32
	host      hostClass
	suffixLen int
	pathLen   int
	conds     int32
	id        int64
}

// beats reports whether a wins over b, in the order of docs/routing.md and
// nothing else: higher priority; exact host over wildcard host over no host;
// longer matched path portion; more method and header conditions; lower id.
// Two wildcard matches rank alike whatever their suffix lengths (suffixLen
// only bounds the search).
func (a *rank) beats(b *rank) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.host != b.host {
		return a.host > b.host
	}
	if a.pathLen != b.pathLen {
		return a.pathLen > b.pathLen
	}
	if a.conds != b.conds {
		return a.conds > b.conds
	}
	return a.id < b.id
}

// candOrder sorts the candidates of one node best first. Within a node the
// host class and matched length are the same for every candidate, so this
// is the rank order restricted to the fields that differ.
func candOrder(a, b *cand) int {
	if a.priority != b.priority {
		return cmp.Compare(b.priority, a.priority)
	}
	if a.conds != b.conds {
		return cmp.Compare(b.conds, a.conds)
	}
	return cmp.Compare(a.id, b.id)
}

// NewTable builds the index. Routes are expected to be validated already,
// but a regex that does not compile is reported rather than trusted, and
// so is an id given to two routes.
func NewTable(routes []Route) (*Table, error) {
	regexes.begin()
	defer regexes.end()
	entries := make([]*entry, 0, len(routes))
	slab := make([]entry, len(routes)) // one allocation for every entry
	for i := range routes {
		if err := compileEntry(&slab[i], &routes[i]); err != nil {
			return nil, err
		}
		entries = append(entries, &slab[i])
	}
	return build(entries)
}

// build indexes compiled entries (in any order).
func build(entries []*entry) (*Table, error) {
	slices.SortFunc(entries, func(a, b *entry) int { return cmp.Compare(a.route.ID, b.route.ID) })
	for i := 1; i < len(entries); i++ {
		if entries[i].route.ID == entries[i-1].route.ID {
			return nil, fmt.Errorf("route id %d is given to two routes", entries[i].route.ID)
		}
	}
	t := &Table{
		entries:         entries,
		wildMaxPriority: math.MinInt32,
		services:        map[int64]int32{},
		primaries:       map[int64]int32{},
	}
	// Build with pointer trees, then freeze each into its flat form.
	exact := map[string]*builder{}
	wild := map[string]*builder{}
	var none *builder
	for _, e := range entries {
		t.count(e, 1)
		if !e.hasHosts() {
			if none == nil {
				none = newBuilder(hostNone, 0)
			}
			none.add(e)
			continue
		}
		// A route listing the same host twice (or "A.com" and "a.com") must
		// land in a bucket once.
		seen := make(map[*builder]bool, len(e.route.Hosts))
		e.eachHost(func(key string, isWild bool) {
			m, class, suffixLen := exact, hostExact, 0
			if isWild {
				m, class, suffixLen = wild, hostWildcard, len(key)
				t.wildMaxPriority = max(t.wildMaxPriority, e.priority)
				t.wildDots |= dotsBit(key)
			}
			b := m[key]
			if b == nil {
				b = newBuilder(class, suffixLen)
				m[key] = b
			}
			if !seen[b] {
				seen[b] = true
				b.add(e)
			}
		})
	}
	for h, b := range exact {
		t.exact.set(h, b.freeze())
	}
	for s, b := range wild {
		t.wild.set(s, b.freeze())
	}
	if none != nil {
		t.any = none.freeze()
	}
	return t, nil
}

// count adds n (1 or -1) to the service reference counts of e's route.
func (t *Table) count(e *entry, n int32) {
	r := &e.route
	t.primaries[r.ServiceID] += n
	if t.primaries[r.ServiceID] == 0 {
		delete(t.primaries, r.ServiceID)
	}
	t.services[r.ServiceID] += n
	if t.services[r.ServiceID] == 0 {
		delete(t.services, r.ServiceID)
	}
	for _, sp := range r.Splits {
		t.services[sp.ServiceID] += n
		if t.services[sp.ServiceID] == 0 {
			delete(t.services, sp.ServiceID)
		}
	}
}

// compileEntry compiles r into e.
func compileEntry(e *entry, r *Route) error {
	*e = entry{route: *r, priority: r.Priority}
	r = &e.route
	r.Hosts, r.Paths = compactStrings(r.Hosts, r.Paths)
	for _, p := range r.Paths {
		expr, ok := strings.CutPrefix(p, "~")
		if !ok {
			continue
		}
		pr, err := regexes.get(expr)
		if err != nil {
			return fmt.Errorf("route %d: path %q: %w", r.ID, p, err)
		}
		e.extra().regexes = append(e.x.regexes, pr)
	}
	for _, m := range r.Methods {
		e.extra().methods = append(e.x.methods, strings.ToUpper(m))
	}
	if len(r.Methods) > 0 {
		e.conds = 1
	}
	for name, value := range r.Headers {
		e.extra().headers = append(e.x.headers, headerCond{
			name:  http.CanonicalHeaderKey(name),
			value: value,
			any:   value == "*",
		})
	}
	if e.x != nil {
		// Sorted so that Explain names the same header on every run.
		slices.SortFunc(e.x.headers, func(a, b headerCond) int { return strings.Compare(a.name, b.name) })
		e.conds += int32(len(e.x.headers))
	}
	for _, sp := range r.Splits {
		x := e.extra()
		x.total += int64(sp.Weight)
		x.splits = append(x.splits, x.total)
	}
	return nil
}

// compactStrings copies hosts and paths into one array of their exact
// length when they have spare capacity (JSON decoding leaves room for four
// elements): the table keeps them for as long as the route lives.
func compactStrings(hosts, paths []string) ([]string, []string) {
	if cap(hosts) == len(hosts) && cap(paths) == len(paths) {
		return hosts, paths
	}
	if len(hosts)+len(paths) == 0 {
		return nil, nil
	}
	both := make([]string, 0, len(hosts)+len(paths))
	both = append(both, hosts...)
	both = append(both, paths...)
	n := len(hosts)
	return both[:n:n], both[n:]
}

// builder is a bucket under construction, with an ordinary pointer tree.
type builder struct {
	bucket
	root *bnode
}

type bnode struct {
	label    string
	indices  string
	children []*bnode
	literal  []cand
	regex    []regexCand
}

func newBuilder(class hostClass, suffixLen int) *builder {
	return &builder{
		bucket: bucket{class: class, suffixLen: suffixLen, maxPriority: math.MinInt32},
		root:   &bnode{},
	}
}

func (b *builder) add(e *entry) {
	b.maxPriority = max(b.maxPriority, e.priority)
	c := e.cand()
	for _, lit := range e.route.Paths {
		if strings.HasPrefix(lit, "~") {
			continue
		}
		n := b.root.insert(lit)
		// Duplicate literals of one route are inserted back to back, since
		// routes are added one at a time.
		if k := len(n.literal); k == 0 || n.literal[k-1].e != e {
			n.literal = append(n.literal, c)
		}
	}
	if len(e.route.Paths) == 0 {
		b.root.literal = append(b.root.literal, c)
	}
	for _, pr := range e.regexes() {
		n := b.root.insert(pr.prefix)
		n.regex = append(n.regex, regexCand{cand: c, re: pr.re})
		b.hasRegex = true
	}
}

// insert returns the node spelling path, creating and splitting nodes as
// needed.
func (n *bnode) insert(path string) *bnode {
	for path != "" {
		i := strings.IndexByte(n.indices, path[0])
		if i < 0 {
			child := &bnode{label: path}
			n.indices += path[:1]
			n.children = append(n.children, child)
			return child
		}
		child := n.children[i]
		common := commonPrefixLen(path, child.label)
		if common < len(child.label) {
			split := &bnode{
				label:    child.label[:common],
				indices:  child.label[common : common+1],
				children: []*bnode{child},
			}
			child.label = child.label[common:]
			n.children[i] = split
			child = split
		}
		path = path[common:]
		n = child
	}
	return n
}

// freeze lays the tree out breadth first, so that siblings are contiguous
// and addressed by one index, and copies every label and index string into
// one arena string, so that a small bucket sits in a few cache lines.
func (b *builder) freeze() bucket {
	out := b.bucket
	var order []*bnode
	var arena strings.Builder
	for queue := []*bnode{b.root}; len(queue) > 0; queue = queue[1:] {
		n := queue[0]
		order = append(order, n)
		arena.WriteString(n.label)
		arena.WriteString(n.indices)
		queue = append(queue, n.children...)
	}
	text := arena.String()
	out.nodes = make([]node, len(order))
	off, next := 0, 1 // next: index of the next node's first child
	for i, n := range order {
		fn := &out.nodes[i]
		fn.label = text[off : off+len(n.label)]
		off += len(n.label)
		fn.indices = text[off : off+len(n.indices)]
		off += len(n.indices)
		fn.child = int32(next)
		next += len(n.children)

		slices.SortStableFunc(n.literal, func(a, b cand) int { return candOrder(&a, &b) })
		fn.lit = int32(len(out.literal))
		out.literal = append(out.literal, n.literal...)
		fn.litEnd = int32(len(out.literal))

		slices.SortStableFunc(n.regex, func(a, b regexCand) int { return candOrder(&a.cand, &b.cand) })
		fn.re = int32(len(out.regex))
		out.regex = append(out.regex, n.regex...)
		fn.reEnd = int32(len(out.regex))
	}
	return out
}

func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Request is what matching looks at.
type Request struct {
	Host   string // may include :port
	Path   string // URL path (r.URL.Path), not including the query
	Method string
	// Header must have canonical keys, as net/http gives them; may be nil.
	Header http.Header
}

// Match is a matching result.
type Match struct {
	Route       *Route // nil when nothing matched
	MatchedPath string // the matched portion of the path

	e *entry // the matched entry (the router's per-route data)
}

// Len is the number of routes.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Match finds the winning route for req. It does not allocate unless the
// host has upper-case letters or a regex entry has to be run.
func (t *Table) Match(req Request) Match {
	if t == nil || len(t.entries) == 0 {
		return Match{}
	}
	m := matcher{req: req, method: methodBit(req.Method)}
	host := normalizeHost(req.Host)

	// Buckets are searched most specific host class first, so that the
	// bounds below prune as early as possible. Literal candidates of every
	// bucket go first and regexes after them: a literal match usually
	// proves that a regex cannot win, which saves running it. The few
	// buckets holding regexes are remembered by value for that second pass.
	var buf [2]bucket
	withRegex := buf[:0]
	if t.exact.n > 0 {
		if b, ok := t.exact.get(host); ok && m.searchLiterals(&b) && b.hasRegex {
			withRegex = append(withRegex, b)
		}
	}
	if t.wild.n > 0 {
		// For a.b.example.com look up ".b.example.com", ".example.com" and
		// ".com", longest first. Starting at index 1 keeps a leading dot (an
		// empty label) from matching a wildcard.
		dots := strings.Count(host, ".") + 1
		for i := 1; i < len(host); i++ {
			if host[i] != '.' {
				continue
			}
			dots-- // in host[i:]
			if !m.canBeat(t.wildMaxPriority, hostWildcard, len(host)-i) {
				break // shorter suffixes cannot win either
			}
			if t.wildDots&(1<<min(dots, 63)) == 0 {
				continue
			}
			if b, ok := t.wild.get(host[i:]); ok && m.searchLiterals(&b) && b.hasRegex {
				withRegex = append(withRegex, b)
			}
		}
	}
	if len(t.any.nodes) > 0 && m.searchLiterals(&t.any) && t.any.hasRegex {
		withRegex = append(withRegex, t.any)
	}
	for i := range withRegex {
		m.searchRegexes(&withRegex[i])
	}
	if !m.found {
		return Match{}
	}
	return Match{Route: &m.best.e.route, MatchedPath: req.Path[:m.best.pathLen], e: m.best.e}
}

// matcher carries the best candidate found so far through one Match.
type matcher struct {
	// req is a copy rather than a pointer to Match's parameter: escape
	// analysis does not tell the fields of matcher apart, and a pointer here
	// would move the request to the heap on every call.
	req    Request
	method uint16 // methodBit(req.Method)
	best   bestRank
	found  bool
}

type bestRank struct {
	rank
	e *entry
}

// canBeat reports whether any route with at most this priority, in this host
// class and wildcard suffix length, could still beat the best match: it
// ranks the best such a route could do, matching the whole path with
// unlimited conditions.
func (m *matcher) canBeat(priority int32, class hostClass, suffixLen int) bool {
	if !m.found {
		return true
	}
	upper := rank{priority, class, suffixLen, len(m.req.Path), math.MaxInt32, math.MinInt64}
	return upper.beats(&m.best.rank)
}

// accepts checks c's method and header conditions.
func (m *matcher) accepts(c *cand) bool {
	if c.methods != 0 && m.method != 0 {
		if c.methods&m.method == 0 {
			return false
		}
		if !c.slow {
			return true
		}
	}
	if c.slow || c.methods != 0 {
		return c.e.accepts(&m.req)
	}
	return true
}

// searchLiterals walks b's radix tree along the path and tries the literal
// candidates of every node on the way. It reports false when the bucket
// was skipped because nothing in it can beat the best match.
func (m *matcher) searchLiterals(b *bucket) bool {
	if !m.canBeat(b.maxPriority, b.class, b.suffixLen) {
		return false
	}
	path := m.req.Path
	n := &b.nodes[0]
	depth := 0
	for {
		if n.lit < n.litEnd {
			m.tryLiterals(b, b.literal[n.lit:n.litEnd], depth)
		}
		if depth == len(path) {
			return true
		}
		i := strings.IndexByte(n.indices, path[depth])
		if i < 0 {
			return true
		}
		n = &b.nodes[int(n.child)+i]
		if !strings.HasPrefix(path[depth:], n.label) {
			return true
		}
		depth += len(n.label)
	}
}

func (m *matcher) tryLiterals(b *bucket, list []cand, depth int) {
	for i := range list {
		c := &list[i]
		r := rank{c.priority, b.class, b.suffixLen, depth, c.conds, c.id}
		if m.found && !r.beats(&m.best.rank) {
			return // the list is sorted: nothing after this wins either
		}
		if m.accepts(c) {
			m.best, m.found = bestRank{r, c.e}, true
			return
		}
	}
}

// searchRegexes walks b's radix tree again, this time trying the regex
// candidates whose literal prefix the path starts with.
func (m *matcher) searchRegexes(b *bucket) {
	if !m.canBeat(b.maxPriority, b.class, b.suffixLen) {
		return
	}
	path := m.req.Path
	n := &b.nodes[0]
	depth := 0
	for {
		if n.re < n.reEnd {
			m.tryRegexes(b, b.regex[n.re:n.reEnd])
		}
		if depth == len(path) {
			return
		}
		i := strings.IndexByte(n.indices, path[depth])
		if i < 0 {
			return
		}
		n = &b.nodes[int(n.child)+i]
		if !strings.HasPrefix(path[depth:], n.label) {
			return
		}
		depth += len(n.label)
	}
}

func (m *matcher) tryRegexes(b *bucket, list []regexCand) {
	path := m.req.Path
	for i := range list {
		c := &list[i]
		// Rank the best this candidate could do (matching the whole path);
		// if even that loses, so does everything after it in the list.
		r := rank{c.priority, b.class, b.suffixLen, len(path), c.conds, c.id}
		if m.found && !r.beats(&m.best.rank) {
			return
		}
		if !m.accepts(&c.cand) {
			continue
		}
		loc := c.re.FindStringIndex(path)
		if loc == nil {
			continue
		}
		r.pathLen = loc[1] // anchored: loc[0] is 0
		if !m.found || r.beats(&m.best.rank) {
			m.best, m.found = bestRank{r, c.e}, true
		}
	}
}

// accepts checks the method and header conditions.
func (e *entry) accepts(req *Request) bool {
	return e.methodOK(req.Method) && e.failedHeader(req.Header) < 0
}

func (e *entry) methodOK(method string) bool {
	methods := e.methods()
	if len(methods) == 0 {
		return true
	}
	for _, m := range methods {
		if m == method || strings.EqualFold(m, method) {
			return true
		}
	}
	return false
}

// failedHeader returns the index of the first header condition h does not
// satisfy, or -1.
func (e *entry) failedHeader(h http.Header) int {
	headers := e.headers()
	for i := range headers {
		c := &headers[i]
		values, ok := h[c.name]
		if !ok {
			return i
		}
		if c.any {
			continue
		}
		if !slices.Contains(values, c.value) {
			return i
		}
	}
	return -1
}

// normalizeHost strips the port and IPv6 brackets and lower-cases host.
// It only allocates when host has upper-case letters.
func normalizeHost(host string) string {
	if host == "" {
		return host
	}
	if host[0] == '[' {
		// "[::1]:8080" or "[::1]"
		if end := strings.IndexByte(host, ']'); end > 0 {
			host = host[1:end]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host, ':') == i {
		// Exactly one colon: host:port. More than one without brackets is a
		// bare IPv6 address, which has no port.
		host = host[:i]
	}
	for i := 0; i < len(host); i++ {
		if 'A' <= host[i] && host[i] <= 'Z' {
			return strings.ToLower(host)
		}
	}
	return host
}

// hostMatch is the scanning form of the host buckets, for Explain (host
// normalized).
func (e *entry) hostMatch(host string) bool {
	if !e.hasHosts() {
		return true
	}
	for _, h := range e.route.Hosts {
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			n := len(host) - len(suffix)
			if n > 1 && host[n-1] == '.' && strings.EqualFold(host[n:], suffix) {
				return true
			}
		} else if normalizeHost(h) == host {
			return true
		}
	}
	return false
}

// pathMatch is the scanning form of the radix tree, for Explain.
func (e *entry) pathMatch(path string) bool {
	if len(e.route.Paths) == 0 {
		return true
	}
	for _, lit := range e.route.Paths {
		if !strings.HasPrefix(lit, "~") && strings.HasPrefix(path, lit) {
			return true
		}
	}
	for _, pr := range e.regexes() {
		if pr.re.MatchString(path) {
			return true
		}
	}
	return false
}

// Explain is the slow path for the admin dry run (/api/v1/router/test) when
// Match found nothing: it scans every route and names the first condition,
// in matching order (host, path, method, headers), that ruled all of them
// out.
func (t *Table) Explain(req Request) string {
	if t.Len() == 0 {
		return "no routes are configured"
	}
	host := normalizeHost(req.Host)

	var byHost []*entry
	for _, e := range t.entries {
		if e.hostMatch(host) {
			byHost = append(byHost, e)
		}
	}
	if len(byHost) == 0 {
		return fmt.Sprintf("no route matches host %q", host)
	}

	var byPath []*entry
	for _, e := range byHost {
		if e.pathMatch(req.Path) {
			byPath = append(byPath, e)
		}
	}
	if len(byPath) == 0 {
		if host == "" {
			return fmt.Sprintf("no route matches path %q", req.Path)
		}
		return fmt.Sprintf("no route matches path %q on host %q", req.Path, host)
	}

	var byMethod []*entry
	var allowed []string
	for _, e := range byPath {
		if e.methodOK(req.Method) {
			byMethod = append(byMethod, e)
			continue
		}
		allowed = append(allowed, e.methods()...)
	}
	if len(byMethod) == 0 {
		slices.Sort(allowed)
		return fmt.Sprintf("method %s not allowed by the routes matching %q (allowed: %s)",
			req.Method, req.Path, strings.Join(slices.Compact(allowed), ", "))
	}

	// Every remaining route failed a header condition. Report the one of
	// the route that would have ranked highest, as it is the likeliest
	// intended target.
	slices.SortFunc(byMethod, func(a, b *entry) int {
		ca, cb := a.cand(), b.cand()
		return candOrder(&ca, &cb)
	})
	for _, e := range byMethod {
		i := e.failedHeader(req.Header)
		if i < 0 {
			continue
		}
		c := e.headers()[i]
		if _, ok := req.Header[c.name]; !ok {
			return fmt.Sprintf("header %s is missing", c.name)
		}
		return fmt.Sprintf("header %s does not match", c.name)
	}
	return "no route matched"
}

// UpstreamPath applies strip_path: it removes exactly the matched portion
// from the front of path; an empty result becomes "/" and a result not
// starting with "/" gets one. The result is normalized like the request
// path (NormalizePath), since stripping a prefix that ends inside a
// segment can leave one: /api.. stripped of /api is /.., which goes
// upstream as /. Without strip_path it returns path unchanged.
func UpstreamPath(r *Route, matchedPath, path string) string {
	if r == nil || !r.StripPath {
		return path
	}
	rest := strings.TrimPrefix(path, matchedPath)
	if rest == "" {
		return "/"
	}
	if rest[0] != '/' {
		rest = "/" + rest
	}
	if strings.Contains(rest, "/.") {
		rest = removeDotSegments(rest)
	}
	return rest
}
