package router

import (
	"math"
	"regexp"
	"slices"
	"strings"
)

// bucket is the frozen form of the routes reachable through one host key:
// its radix tree over literal path prefixes and its candidates, all laid
// out in one string (blob), so that a lookup reads a few adjacent cache
// lines instead of following a pointer per node, label and candidate list.
// With tens of thousands of routes almost every bucket a request visits is
// cold, and matching time is the number of cache misses.
//
// The blob holds no pointers: a candidate names its entry by slot
// (Table.slots) and its regular expression by index into res.
//
// Layout (little-endian, offsets in bytes from the start of the blob):
//
//	header   hdrSize bytes: class, hasRegex, maxPriority, key length and
//	         the offsets of the sections below
//	key      the host key (normalized host, or ".suffix" of a wildcard)
//	nodes    nodeSize bytes each, breadth first: node 0 is the root and
//	         the children of a node are contiguous
//	text     every node's label followed by its index bytes (the first
//	         byte of each child's label, in child order), unless they
//	         fit in the node
//	literal  litSize bytes per literal candidate
//	regex    reSize bytes per regex candidate
//	ranges   per node, the regex candidates filed under it (8 bytes);
//	         only when the bucket has regex candidates
//	needs    the literals regex candidates require (pathRegex.need)
//
// A node's candidates are sorted by candOrder, so the first one that
// satisfies its conditions is the best of its node.
type bucket struct {
	blob string
	// res are the regex candidates' expressions (pathRegex.re); nil when
	// there are none. A pointer keeps hostSlot at 32 bytes, two to a
	// cache line.
	res *[]*regexp.Regexp
}

// Header fields.
const (
	hdrClass    = 0 // u8 hostClass
	hdrHasRegex = 1 // u8 0 or 1
	hdrMaxPrio  = 4 // i32 highest route priority in the bucket
	hdrKeyLen   = 8 // u32
	hdrNodes    = 12
	hdrLiteral  = 16
	hdrRegex    = 20
	hdrRanges   = 24
	hdrSize     = 28
)

// Node fields: the label is blob[label:label+labelLen] and the index
// bytes follow it; its children are nodes child..child+kids-1; its literal
// candidates are lit..litEnd-1. A label and index bytes that fit in
// nodeInlineLen are stored in the node itself (label points there), so
// that a step down a large tree costs one cache miss, not two.
const (
	nodeLabel     = 0
	nodeLabelLen  = 4
	nodeKids      = 8
	nodeChild     = 12
	nodeLit       = 16
	nodeLitEnd    = 20
	nodeInline    = 24
	nodeInlineLen = 16
	nodeSize      = 40
)

// Candidate fields (cand without its entry pointer; slot names the entry).
// A regex candidate adds the index of its expression in bucket.res,
// whether it is a split one (matched against what follows its node), and
// where its required literal is in the blob.
const (
	candID       = 0 // i64
	candSlot     = 8
	candPriority = 12
	candConds    = 16
	candMethods  = 20 // u16
	candSlow     = 22 // u8
	candSplit    = 23 // u8
	litSize      = 24
	candRe       = 24
	candNeed     = 28
	candNeedLen  = 32
	reSize       = 36
)

func u32(s string, i int) uint32 {
	s = s[i : i+4] // one bounds check, then one load
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

func (b *bucket) empty() bool            { return b.blob == "" }
func (b *bucket) class() hostClass       { return hostClass(b.blob[hdrClass]) }
func (b *bucket) hasRegex() bool         { return b.blob[hdrHasRegex] != 0 }
func (b *bucket) maxPriority() int32     { return int32(u32(b.blob, hdrMaxPrio)) }
func (b *bucket) key() string            { return b.blob[hdrSize : hdrSize+int(u32(b.blob, hdrKeyLen))] }
func (b *bucket) node(i uint32) int      { return int(u32(b.blob, hdrNodes)) + int(i)*nodeSize }
func (b *bucket) literalAt(i uint32) int { return int(u32(b.blob, hdrLiteral)) + int(i)*litSize }
func (b *bucket) regexAt(i uint32) int   { return int(u32(b.blob, hdrRegex)) + int(i)*reSize }

// suffixLen is the length of the wildcard suffix (".example.com") for a
// wildcard bucket, 0 otherwise.
func (b *bucket) suffixLen() int {
	if b.class() != hostWildcard {
		return 0
	}
	return int(u32(b.blob, hdrKeyLen))
}

// regexRange returns the regex candidates filed under the node at offset n.
func (b *bucket) regexRange(n int) (uint32, uint32) {
	i := (n - int(u32(b.blob, hdrNodes))) / nodeSize
	r := int(u32(b.blob, hdrRanges)) + i*8
	return u32(b.blob, r), u32(b.blob, r+4)
}

// le32 reads a little-endian u32 from the first four bytes of s. Callers
// pass a slice of a record of known length, so that the compiler drops
// the bounds checks.
func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// child returns the offset of the child of the node at offset n whose
// label starts with c, and that label; ok is false when there is none.
func (b *bucket) child(n int, c byte) (child int, label string, ok bool) {
	s := b.blob
	nd := s[n : n+nodeSize]
	text := int(le32(nd[nodeLabel:])) + int(le32(nd[nodeLabelLen:]))
	i := strings.IndexByte(s[text:text+int(le32(nd[nodeKids:]))], c)
	if i < 0 {
		return 0, "", false
	}
	child = b.node(le32(nd[nodeChild:]) + uint32(i))
	cd := s[child : child+nodeSize]
	off := int(le32(cd[nodeLabel:]))
	return child, s[off : off+int(le32(cd[nodeLabelLen:]))], true
}

// literals returns the literal candidates of the node at offset n.
func (b *bucket) literals(n int) (lit, end uint32) {
	nd := b.blob[n : n+nodeSize]
	return le32(nd[nodeLit:]), le32(nd[nodeLitEnd:])
}

// candAt decodes the candidate at offset off (without its entry).
func (b *bucket) candAt(off int) cand {
	c := b.blob[off : off+litSize]
	return cand{
		id:       int64(uint64(le32(c[candID:])) | uint64(le32(c[candID+4:]))<<32),
		slot:     int32(le32(c[candSlot:])),
		priority: int32(le32(c[candPriority:])),
		conds:    int32(le32(c[candConds:])),
		methods:  uint16(c[candMethods]) | uint16(c[candMethods+1])<<8,
		slow:     c[candSlow] != 0,
	}
}

// slots lists the entry slots of the bucket's candidates, each once.
func (b *bucket) slots() []int32 {
	if b.empty() {
		return nil
	}
	var out []int32
	lit, re := u32(b.blob, hdrLiteral), u32(b.blob, hdrRegex)
	for off := int(lit); off < int(re); off += litSize {
		out = append(out, int32(u32(b.blob, off+candSlot)))
	}
	for off := int(re); off < int(u32(b.blob, hdrRanges)); off += reSize {
		out = append(out, int32(u32(b.blob, off+candSlot)))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// builder is a bucket under construction, with an ordinary pointer tree.
type builder struct {
	class       hostClass
	key         string
	hasRegex    bool
	maxPriority int32
	root        *bnode
}

type bnode struct {
	label    string
	indices  string
	children []*bnode
	literal  []cand
	regex    []regexCand
}

type regexCand struct {
	cand
	pr *pathRegex
}

func newBuilder(class hostClass, key string) *builder {
	return &builder{class: class, key: key, maxPriority: math.MinInt32, root: &bnode{}}
}

func (b *builder) add(e *entry) {
	b.maxPriority = max(b.maxPriority, e.route.Priority)
	c := e.cand()
	for _, lit := range e.route.Paths {
		if strings.HasPrefix(lit, "~") {
			continue
		}
		n := b.root.insert(lit)
		// Duplicate literals of one route are inserted back to back, since
		// routes are added one at a time.
		if k := len(n.literal); k == 0 || n.literal[k-1].slot != c.slot {
			n.literal = append(n.literal, c)
		}
	}
	if len(e.route.Paths) == 0 {
		b.root.literal = append(b.root.literal, c)
	}
	for i := range e.regexes() {
		pr := &e.x.regexes[i]
		n := b.root.insert(pr.prefix)
		n.regex = append(n.regex, regexCand{cand: c, pr: pr})
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

// freeze lays the tree out breadth first into one blob (see bucket).
func (b *builder) freeze() bucket {
	var order []*bnode
	textLen, nlit, nre, needs := 0, 0, 0, 0
	for queue := []*bnode{b.root}; len(queue) > 0; queue = queue[1:] {
		n := queue[0]
		order = append(order, n)
		if l := len(n.label) + len(n.indices); l > nodeInlineLen {
			textLen += l
		}
		nlit += len(n.literal)
		nre += len(n.regex)
		for _, rc := range n.regex {
			needs += len(rc.pr.need)
		}
		queue = append(queue, n.children...)
	}
	nodesOff := hdrSize + len(b.key)
	textOff := nodesOff + len(order)*nodeSize
	litOff := textOff + textLen
	reOff := litOff + nlit*litSize
	rangesOff := reOff + nre*reSize
	needsOff := rangesOff
	if b.hasRegex {
		needsOff += len(order) * 8
	}
	size := needsOff + needs
	buf := make([]byte, size)
	put := func(at int, v uint32) {
		buf[at], buf[at+1], buf[at+2], buf[at+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	putCand := func(at int, c *cand) {
		put(at+candID, uint32(c.id))
		put(at+candID+4, uint32(uint64(c.id)>>32))
		put(at+candSlot, uint32(c.slot))
		put(at+candPriority, uint32(c.priority))
		put(at+candConds, uint32(c.conds))
		buf[at+candMethods], buf[at+candMethods+1] = byte(c.methods), byte(c.methods>>8)
		if c.slow {
			buf[at+candSlow] = 1
		}
	}

	buf[hdrClass] = byte(b.class)
	if b.hasRegex {
		buf[hdrHasRegex] = 1
	}
	put(hdrMaxPrio, uint32(b.maxPriority))
	put(hdrKeyLen, uint32(len(b.key)))
	put(hdrNodes, uint32(nodesOff))
	put(hdrLiteral, uint32(litOff))
	put(hdrRegex, uint32(reOff))
	put(hdrRanges, uint32(rangesOff))
	copy(buf[hdrSize:], b.key)

	var res []*regexp.Regexp
	text, lit, re, need := textOff, 0, 0, needsOff
	next := 1 // index of the next node's first child
	for i, n := range order {
		at := nodesOff + i*nodeSize
		put(at+nodeLabelLen, uint32(len(n.label)))
		put(at+nodeKids, uint32(len(n.indices)))
		put(at+nodeChild, uint32(next))
		next += len(n.children)
		if len(n.label)+len(n.indices) <= nodeInlineLen {
			put(at+nodeLabel, uint32(at+nodeInline))
			copy(buf[at+nodeInline+copy(buf[at+nodeInline:], n.label):], n.indices)
		} else {
			put(at+nodeLabel, uint32(text))
			text += copy(buf[text:], n.label)
			text += copy(buf[text:], n.indices)
		}

		slices.SortStableFunc(n.literal, func(a, b cand) int { return candOrder(&a, &b) })
		put(at+nodeLit, uint32(lit))
		for j := range n.literal {
			putCand(litOff+lit*litSize, &n.literal[j])
			lit++
		}
		put(at+nodeLitEnd, uint32(lit))

		slices.SortStableFunc(n.regex, func(a, b regexCand) int { return candOrder(&a.cand, &b.cand) })
		if b.hasRegex {
			put(rangesOff+i*8, uint32(re))
		}
		for j := range n.regex {
			at := reOff + re*reSize
			rc := &n.regex[j]
			putCand(at, &rc.cand)
			if rc.pr.split {
				buf[at+candSplit] = 1
			}
			put(at+candRe, uint32(len(res)))
			res = append(res, rc.pr.re)
			put(at+candNeed, uint32(need))
			put(at+candNeedLen, uint32(len(rc.pr.need)))
			need += copy(buf[need:], rc.pr.need)
			re++
		}
		if b.hasRegex {
			put(rangesOff+i*8+4, uint32(re))
		}
	}
	out := bucket{blob: string(buf)}
	if res != nil {
		out.res = &res
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
