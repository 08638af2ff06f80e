package router

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"net/textproto"
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
// by comparisons, so the layout avoids pointer hops: one open-addressing
// index holds every host key (hostindex.go), and each bucket is one
// pointer-free blob holding its key, tree, labels and candidates
// (bucket.go), so that a request to a cold host reads the slot array once
// and then a few adjacent cache lines.
type Table struct {
	// entries are the routes, sorted by id (lookups by id, Explain).
	entries []*entry
	// slots are the entries by entry.slot, the number buckets name them
	// by; nil where a route was removed (free lists those slots). An
	// entry keeps its slot for as long as it lives, in every table that
	// shares it.
	slots []*entry
	free  []int32
	hosts hostIndex // exact hosts and wildcard suffixes → bucket
	any   bucket    // routes without hosts; empty when there are none
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

// cand is a route as stored in a bucket (encoded, see bucket.go). The
// ranking fields and the common method condition are copied out of the
// entry so that a candidate can be ranked, pruned and usually accepted
// without touching other memory.
type cand struct {
	id       int64
	slot     int32 // the entry, in Table.slots
	priority int32
	conds    int32
	// methods is a mask of methodBit values when every method the route
	// lists is a standard one, 0 when the route lists none or a custom one.
	methods uint16
	// slow is set when the entry itself must be consulted: header
	// conditions, or methods the mask cannot express.
	slow bool
}

// entry is a route compiled for matching. It keeps little beside the
// route: at 50,000 routes every word of it is 400 KB. The host keys and
// literal paths are read from the route when needed (building or
// updating buckets, Explain), and what few routes have sits behind x.
type entry struct {
	// route is the entry's own copy, so that the *Route handed out by
	// Match stays valid and unchanged whatever the caller does with the
	// slice the table was built from.
	route Route
	conds int32 // (1 if methods) + number of header conditions
	slot  int32 // in Table.slots
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
			fn("."+strings.ToLower(strings.TrimSuffix(suffix, ".")), true)
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
	// re is compiled as ^(?:re), or, when split is set, is the shared
	// compiled rest that matches what follows prefix (pathexpr.Split).
	re *regexp.Regexp
	// prefix is a literal every match starts with; it places the entry in
	// the radix tree.
	prefix string
	split  bool
	// need is a literal every match contains ("": none known), so that a
	// path without it skips the regex (pathexpr.Required).
	need string
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
	c := cand{id: e.route.ID, slot: e.slot, priority: e.route.Priority, conds: e.conds}
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
	slots := make([]*entry, len(routes))
	slab := make([]entry, len(routes)) // one allocation for every entry
	for i := range routes {
		if err := compileEntry(&slab[i], &routes[i]); err != nil {
			return nil, err
		}
		slab[i].slot = int32(i)
		slots[i] = &slab[i]
	}
	return build(slices.Clone(slots), slots, nil)
}

// build indexes compiled entries (in any order), given the slots they
// have (and the free ones).
func build(entries, slots []*entry, free []int32) (*Table, error) {
	slices.SortFunc(entries, func(a, b *entry) int { return cmp.Compare(a.route.ID, b.route.ID) })
	for i := 1; i < len(entries); i++ {
		if entries[i].route.ID == entries[i-1].route.ID {
			return nil, fmt.Errorf("route id %d is given to two routes", entries[i].route.ID)
		}
	}
	t := &Table{
		entries:         entries,
		slots:           slots,
		free:            free,
		wildMaxPriority: math.MinInt32,
		services:        map[int64]int32{},
		primaries:       map[int64]int32{},
	}
	// Build with pointer trees, then freeze each into its flat form.
	type hostKey struct {
		key  string
		wild bool
	}
	hosts := map[hostKey]*builder{}
	var none *builder
	for _, e := range entries {
		t.count(e, 1)
		if !e.hasHosts() {
			if none == nil {
				none = newBuilder(hostNone, "")
			}
			none.add(e)
			continue
		}
		// A route listing the same host twice (or "A.com" and "a.com") must
		// land in a bucket once.
		seen := make(map[*builder]bool, len(e.route.Hosts))
		e.eachHost(func(key string, wild bool) {
			class := hostExact
			if wild {
				class = hostWildcard
				t.wildMaxPriority = max(t.wildMaxPriority, e.route.Priority)
				t.wildDots |= dotsBit(key)
			}
			b := hosts[hostKey{key, wild}]
			if b == nil {
				b = newBuilder(class, key)
				hosts[hostKey{key, wild}] = b
			}
			if !seen[b] {
				seen[b] = true
				b.add(e)
			}
		})
	}
	for _, b := range hosts {
		t.hosts.set(b.freeze())
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
	*e = entry{route: *r}
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

// Resolve is how a request on its way upstream is matched, by the proxy
// and by the dry run alike: req.Path (decoded) is normalized
// (NormalizePath; the path to forward is returned), then matched. When the
// path has ";" it is matched a second time the way Tomcat, Jetty and
// Spring read it, with each segment's ";parameters" cut (/public/..;/admin
// is /admin there, /;/admin is //admin, /admin;x/y is /admin/y), and
// ErrPathParams says that the two readings pick different routes: such a
// request would pass by the plugins of the route its upstream serves.
// Likewise, a method override header (MethodOverrideHeaders) naming a
// method the matched route would not be picked for is ErrMethodOverride.
func (t *Table) Resolve(req Request) (path string, m Match, err error) {
	if req.Path, err = NormalizePath(req.Path); err != nil {
		return "", Match{}, err
	}
	path = req.Path
	m = t.Match(req)
	if m.Route == nil {
		return path, m, nil
	}
	if strings.IndexByte(path, ';') >= 0 {
		cut, err := NormalizePath(cutParams(path))
		if err != nil {
			return "", Match{}, err
		}
		if cut != path {
			r2 := req
			r2.Path = cut
			if m2 := t.Match(r2); m2.Route != m.Route {
				return "", Match{}, ErrPathParams
			}
		}
	}
	if !t.overrideKeepsRoute(req, m.Route) {
		return "", Match{}, ErrMethodOverride
	}
	return path, m, nil
}

// MethodOverrideHeaders are the headers with which frameworks let a client
// replace the request method (Express's method-override, Rack, Symfony and
// Laravel for POST; X-HTTP-Method for OData and ASP.NET; Google's APIs).
var MethodOverrideHeaders = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// maxOverrides bounds the override methods one request may name.
const maxOverrides = 8

// overrideKeepsRoute reports whether every method that req's method
// override headers name (each comma-separated entry) picks route too, or
// req has none: a route whose methods are a policy (POST public, DELETE
// behind key-auth, or not routed at all) would otherwise pass a POST
// saying "X-HTTP-Method-Override: DELETE" to an upstream that serves it
// as a DELETE. Requests without such headers cost three map lookups.
//
// At most maxOverrides methods are checked (each is a match): a client
// listing thousands in its headers is refused rather than costing a
// match each.
func (t *Table) overrideKeepsRoute(req Request, route *Route) bool {
	checked := 0
	for _, name := range MethodOverrideHeaders {
		for _, v := range req.Header[name] {
			for method := range strings.SplitSeq(v, ",") {
				method = textproto.TrimString(method)
				if method == "" || strings.EqualFold(method, req.Method) {
					continue
				}
				if checked++; checked > maxOverrides {
					return false
				}
				r2 := req
				r2.Method = strings.ToUpper(method)
				if t.Match(r2).Route != route {
					return false
				}
			}
		}
	}
	return true
}

// Match finds the winning route for req. It does not allocate unless the
// host has upper-case letters or a regex entry has to be run.
func (t *Table) Match(req Request) Match {
	if t == nil || len(t.entries) == 0 {
		return Match{}
	}
	m := matcher{req: req, method: methodBit(req.Method), slots: t.slots}
	host := normalizeHost(req.Host)

	// Buckets are searched most specific host class first, so that the
	// bounds below prune as early as possible. Literal candidates of every
	// bucket go first and regexes after them: a literal match usually
	// proves that a regex cannot win, which saves running it. The few
	// buckets holding regexes are remembered for that second pass.
	var buf [4]*bucket
	withRegex := buf[:0]
	if t.hosts.n > 0 {
		if b := t.hosts.get(host, hostExact); b != nil && m.searchLiterals(b) && b.hasRegex() {
			withRegex = append(withRegex, b)
		}
	}
	if t.wildDots != 0 {
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
			if b := t.hosts.get(host[i:], hostWildcard); b != nil && m.searchLiterals(b) && b.hasRegex() {
				withRegex = append(withRegex, b)
			}
		}
	}
	if !t.any.empty() && m.searchLiterals(&t.any) && t.any.hasRegex() {
		withRegex = append(withRegex, &t.any)
	}
	for _, b := range withRegex {
		m.searchRegexes(b)
	}
	if !m.found {
		return Match{}
	}
	e := t.slots[m.best.slot]
	return Match{Route: &e.route, MatchedPath: req.Path[:m.best.pathLen], e: e}
}

// matcher carries the best candidate found so far through one Match.
type matcher struct {
	// req is a copy rather than a pointer to Match's parameter: escape
	// analysis does not tell the fields of matcher apart, and a pointer here
	// would move the request to the heap on every call.
	req    Request
	method uint16 // methodBit(req.Method)
	slots  []*entry
	best   bestRank
	found  bool
}

type bestRank struct {
	rank
	slot int32
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
		return m.slots[c.slot].accepts(&m.req)
	}
	return true
}

// searchLiterals walks b's radix tree along the path and tries the literal
// candidates of every node on the way. It reports false when the bucket
// was skipped because nothing in it can beat the best match.
func (m *matcher) searchLiterals(b *bucket) bool {
	class, suffixLen := b.class(), b.suffixLen()
	if !m.canBeat(b.maxPriority(), class, suffixLen) {
		return false
	}
	path := m.req.Path
	n := b.node(0)
	depth := 0
	for {
		if lit, end := b.literals(n); lit < end {
			m.tryLiterals(b, lit, end, class, suffixLen, depth)
		}
		if depth == len(path) {
			return true
		}
		child, label, ok := b.child(n, path[depth])
		if !ok || !strings.HasPrefix(path[depth:], label) {
			return true
		}
		n = child
		depth += len(label)
	}
}

// tryLiterals tries the literal candidates lit..end-1 of b, matched to
// depth.
func (m *matcher) tryLiterals(b *bucket, lit, end uint32, class hostClass, suffixLen, depth int) {
	for off, stop := b.literalAt(lit), b.literalAt(end); off < stop; off += litSize {
		c := b.candAt(off)
		r := rank{c.priority, class, suffixLen, depth, c.conds, c.id}
		if m.found && !r.beats(&m.best.rank) {
			return // the list is sorted: nothing after this wins either
		}
		if m.accepts(&c) {
			m.best, m.found = bestRank{r, c.slot}, true
			return
		}
	}
}

// searchRegexes walks b's radix tree again, this time trying the regex
// candidates whose literal prefix the path starts with.
func (m *matcher) searchRegexes(b *bucket) {
	class, suffixLen := b.class(), b.suffixLen()
	if !m.canBeat(b.maxPriority(), class, suffixLen) {
		return
	}
	path := m.req.Path
	n := b.node(0)
	depth := 0
	for {
		if re, end := b.regexRange(n); re < end {
			m.tryRegexes(b, re, end, class, suffixLen, depth)
		}
		if depth == len(path) {
			return
		}
		child, label, ok := b.child(n, path[depth])
		if !ok || !strings.HasPrefix(path[depth:], label) {
			return
		}
		n = child
		depth += len(label)
	}
}

// tryRegexes tries the regex candidates re..end-1 of b, filed under a
// node at depth.
func (m *matcher) tryRegexes(b *bucket, re, end uint32, class hostClass, suffixLen, depth int) {
	path := m.req.Path
	for off, stop := b.regexAt(re), b.regexAt(end); off < stop; off += reSize {
		c := b.candAt(off)
		// Rank the best this candidate could do (matching the whole path);
		// if even that loses, so does everything after it in the list.
		r := rank{c.priority, class, suffixLen, len(path), c.conds, c.id}
		if m.found && !r.beats(&m.best.rank) {
			return
		}
		if !m.accepts(&c) {
			continue
		}
		if n := int(u32(b.blob, off+candNeedLen)); n > 0 {
			need := int(u32(b.blob, off+candNeed))
			if !strings.Contains(path, b.blob[need:need+n]) {
				continue
			}
		}
		rx := (*b.res)[u32(b.blob, off+candRe)]
		if b.blob[off+candSplit] != 0 {
			// The tree walk to this node matched the literal head.
			loc := rx.FindStringIndex(path[depth:])
			if loc == nil {
				continue
			}
			r.pathLen = depth + loc[1]
		} else {
			loc := rx.FindStringIndex(path)
			if loc == nil {
				continue
			}
			r.pathLen = loc[1] // anchored: loc[0] is 0
		}
		if !m.found || r.beats(&m.best.rank) {
			m.best, m.found = bestRank{r, c.slot}, true
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

// normalizeHost strips the port, IPv6 brackets and a trailing dot, and
// lower-cases host.
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
	} else if i := strings.IndexByte(host, ':'); i >= 0 {
		// host:port, or a bare IPv6 address, which has no port. Any other
		// host with more colons ("secure.example.com:1:2") ends at the
		// first one, as nginx and Express read it: an upstream that gets
		// it (preserve_host) serves it as that host, so it must not pass
		// by that host's route (and its auth plugins) to a host-less one.
		if strings.IndexByte(host[i+1:], ':') < 0 || !isIPv6(host) {
			host = host[:i]
		}
	}
	// A fully qualified name's trailing dot names the same host: without
	// this, "secure.example.com." would pass by that host's route (and its
	// auth plugins) to a host-less one.
	host = strings.TrimSuffix(host, ".")
	for i := 0; i < len(host); i++ {
		if 'A' <= host[i] && host[i] <= 'Z' {
			return strings.ToLower(host)
		}
	}
	return host
}

// isIPv6 reports whether host is a bare IPv6 address.
func isIPv6(host string) bool {
	a, err := netip.ParseAddr(host)
	return err == nil && a.Is6()
}

// hostMatch is the scanning form of the host buckets, for Explain (host
// normalized).
func (e *entry) hostMatch(host string) bool {
	if !e.hasHosts() {
		return true
	}
	for _, h := range e.route.Hosts {
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			suffix = strings.TrimSuffix(suffix, ".")
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
		if pr.match(path) >= 0 {
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

// ForwardPath is the path a request matched by r goes upstream with:
// path (normalized already) with strip_path applied (UpstreamPath) and
// normalized again, since the rest of a prefix that ends inside a segment
// can hold what the whole path did not (/x.\y stripped of /x is /.\y, a
// backslash-delimited dot segment, refused). The proxy and the dry run of
// /api/v1/router/test both call it, so the dry run refuses what the proxy
// refuses.
func ForwardPath(r *Route, matchedPath, path string) (string, error) {
	if r == nil || !r.StripPath {
		return path, nil
	}
	return NormalizePath(UpstreamPath(r, matchedPath, path))
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
