// Package wasmlimits checks what a binary WebAssembly module declares
// against limits before any runtime decodes it: the counts of its types,
// parameters, results, imports, functions, locals, globals, tables,
// memories, exports, element and data segments, custom sections and
// name-section entries, and the sizes of its tables and memory. It reads
// the module once, allocating nothing in proportion to what the module
// declares, and also refuses what would make a decoder read past a
// section (truncated or overlapping sections, vectors longer than the
// bytes that hold them).
//
// The runtime's decoder sizes its tables by a declared count before it
// reads the entries counted (a function declaring 2^32-1 locals, a name
// section declaring 2^32-1 names, a string 4 GiB long), so an unchecked
// count is an allocation of gigabytes from a module of a few hundred
// bytes. Instructions are not read here (package bound measures them).
// Its tests are beside it.
package wasmlimits

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Limits are what one module may declare. A zero field is no module may
// declare any (callers start from Default).
type Limits struct {
	MaxTypes   uint64 // function types
	MaxParams  uint64 // parameters of one function type
	MaxResults uint64 // results of one function type
	MaxImports uint64
	// MaxFunctions counts imported and defined functions.
	MaxFunctions         uint64
	MaxLocalsPerFunction uint64 // declared locals of one function (parameters not included)
	MaxLocals            uint64 // declared locals of all functions
	MaxGlobals           uint64 // imported and defined
	MaxTables            uint64 // imported and defined
	// MaxTableElements bounds a table's initial size and, when it has
	// one, its maximum.
	MaxTableElements uint64
	MaxMemories      uint64 // imported and defined
	// MaxMemoryPages bounds a memory's initial size in 64 KiB pages (its
	// maximum is the runtime's concern: growing beyond its cap fails).
	MaxMemoryPages     uint64
	MaxExports         uint64
	MaxElementSegments uint64
	MaxElements        uint64 // entries of all element segments
	MaxDataSegments    uint64
	MaxCustomSections  uint64
	// MaxNames bounds the entries of the name section: function names
	// and local names, all functions together.
	MaxNames uint64
}

// Default are limits far above what modules built by compilers and
// proxy-wasm SDKs declare (the largest of those are Go programs of tens of
// thousands of functions), and far below what exhausts a process: at
// these limits the runtime's decoded module and its per-instance tables
// stay within tens of megabytes besides the module's own bytes.
var Default = Limits{
	MaxTypes:             10_000,
	MaxParams:            1_000,
	MaxResults:           1_000,
	MaxImports:           10_000,
	MaxFunctions:         100_000,
	MaxLocalsPerFunction: 50_000,
	MaxLocals:            1_000_000,
	MaxGlobals:           10_000,
	MaxTables:            16,
	MaxTableElements:     100_000,
	MaxMemories:          1,
	MaxMemoryPages:       65_536,
	MaxExports:           10_000,
	MaxElementSegments:   10_000,
	MaxElements:          100_000,
	MaxDataSegments:      100_000,
	MaxCustomSections:    1_000,
	MaxNames:             500_000,
}

// Section ids of WebAssembly 2.0.
const (
	secCustom = iota
	secType
	secImport
	secFunction
	secTable
	secMemory
	secGlobal
	secExport
	secStart
	secElement
	secCode
	secData
	secDataCount
)

var sectionNames = [...]string{"custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "data count"}

// checker holds the counts the module has declared so far.
type checker struct {
	l Limits
	r reader

	types, funcs, defined, globals, tables, memories uint64
	locals, elements, names, customs                 uint64
	dataCount                                        uint64
	hasDataCount, hasName                            bool
}

// Check reads wasm and returns an error naming the first count or size
// beyond l, or the first malformed part of the module's structure.
func Check(wasm []byte, l Limits) error {
	c := &checker{l: l, r: reader{b: wasm}}
	if string(c.r.bytes(8)) != "\x00asm\x01\x00\x00\x00" {
		return errors.New("not a WebAssembly binary module (version 1)")
	}
	var last byte // the last non-custom section's order
	codeSeen := false
	for c.r.pos < len(c.r.b) {
		id := c.r.byte()
		size := c.r.u32()
		if c.r.err != nil {
			return fmt.Errorf("section header at byte %d: %w", c.r.pos, c.r.err)
		}
		if int(id) >= len(sectionNames) {
			return fmt.Errorf("section id %d at byte %d is not a WebAssembly 2.0 section", id, c.r.pos)
		}
		if uint64(size) > uint64(len(c.r.b)-c.r.pos) {
			return fmt.Errorf("%s section at byte %d declares %d bytes, %d are left in the module (truncated or overlapping sections)",
				sectionNames[id], c.r.pos, size, len(c.r.b)-c.r.pos)
		}
		if id != secCustom {
			o := order(id)
			if o <= last {
				return fmt.Errorf("%s section at byte %d is out of order or repeated", sectionNames[id], c.r.pos)
			}
			last = o
		}
		s := &checker{l: c.l, r: reader{b: c.r.b[:c.r.pos+int(size)], pos: c.r.pos}}
		s.copyCounts(c)
		if err := s.section(id); err != nil {
			return fmt.Errorf("%s section: %w", sectionNames[id], err)
		}
		if s.r.pos != len(s.r.b) {
			return fmt.Errorf("%s section: %d bytes left over after its declared contents", sectionNames[id], len(s.r.b)-s.r.pos)
		}
		c.copyCounts(s)
		c.r.pos = s.r.pos
		if id == secCode {
			codeSeen = true
		}
	}
	if c.defined > 0 && !codeSeen {
		return fmt.Errorf("%d functions declared, no code section", c.defined)
	}
	return nil
}

// order is a section's place in a module: data count sits between
// element and code.
func order(id byte) byte {
	switch {
	case id == secDataCount:
		return 2*secElement + 1
	default:
		return 2 * id
	}
}

func (c *checker) copyCounts(from *checker) {
	r := c.r
	*c = *from
	c.r = r
}

// count reads a vector's length and checks it against max (what is
// counted, for the error) and against the bytes left, each item taking
// at least minSize bytes.
func (c *checker) count(what string, max uint64, minSize int) uint64 {
	n := uint64(c.r.u32())
	if c.r.err != nil {
		return 0
	}
	if n > max {
		c.r.fail(fmt.Errorf("%d %s declared; the limit is %d", n, what, max))
		return 0
	}
	if left := uint64(len(c.r.b) - c.r.pos); n*uint64(minSize) > left {
		c.r.fail(fmt.Errorf("%d %s declared in %d bytes", n, what, left))
		return 0
	}
	return n
}

// total adds n to *sum and checks the sum against max.
func (c *checker) total(sum *uint64, n uint64, what string, max uint64) {
	*sum += n
	if *sum > max {
		c.r.fail(fmt.Errorf("%d %s declared; the limit is %d", *sum, what, max))
	}
}

func (c *checker) section(id byte) error {
	r := &c.r
	switch id {
	case secCustom:
		c.custom()
	case secType:
		c.total(&c.types, c.count("types", c.l.MaxTypes, 3), "types", c.l.MaxTypes)
		for i := uint64(0); i < c.types && r.err == nil; i++ {
			if f := r.byte(); f != 0x60 && r.err == nil {
				r.fail(fmt.Errorf("type %d: form 0x%02x is not a function type", i, f))
			}
			for n := c.count("parameters", c.l.MaxParams, 1); n > 0 && r.err == nil; n-- {
				r.valueType()
			}
			for n := c.count("results", c.l.MaxResults, 1); n > 0 && r.err == nil; n-- {
				r.valueType()
			}
		}
	case secImport:
		for n := c.count("imports", c.l.MaxImports, 4); n > 0 && r.err == nil; n-- {
			r.name()
			r.name()
			switch kind := r.byte(); kind {
			case 0:
				c.typeIndex()
				c.total(&c.funcs, 1, "functions (imported and defined)", c.l.MaxFunctions)
			case 1:
				c.table()
			case 2:
				c.memory()
			case 3:
				r.valueType()
				r.mutability()
				c.total(&c.globals, 1, "globals (imported and defined)", c.l.MaxGlobals)
			default:
				r.fail(fmt.Errorf("import kind 0x%02x", kind))
			}
		}
	case secFunction:
		c.defined = c.count("functions", c.l.MaxFunctions, 1)
		c.total(&c.funcs, c.defined, "functions (imported and defined)", c.l.MaxFunctions)
		for i := uint64(0); i < c.defined && r.err == nil; i++ {
			c.typeIndex()
		}
	case secTable:
		for n := c.count("tables", c.l.MaxTables, 3); n > 0 && r.err == nil; n-- {
			c.table()
		}
	case secMemory:
		for n := c.count("memories", c.l.MaxMemories, 2); n > 0 && r.err == nil; n-- {
			c.memory()
		}
	case secGlobal:
		for n := c.count("globals", c.l.MaxGlobals, 3); n > 0 && r.err == nil; n-- {
			r.valueType()
			r.mutability()
			r.constExpr()
			c.total(&c.globals, 1, "globals (imported and defined)", c.l.MaxGlobals)
		}
	case secExport:
		for n := c.count("exports", c.l.MaxExports, 3); n > 0 && r.err == nil; n-- {
			r.name()
			if kind := r.byte(); kind > 3 && r.err == nil {
				r.fail(fmt.Errorf("export kind 0x%02x", kind))
			}
			r.u32()
		}
	case secStart:
		r.u32()
	case secElement:
		for n := c.count("element segments", c.l.MaxElementSegments, 2); n > 0 && r.err == nil; n-- {
			c.elementSegment()
		}
	case secDataCount:
		c.dataCount = c.count("data segments", c.l.MaxDataSegments, 0)
		c.hasDataCount = true
	case secCode:
		n := c.count("function bodies", c.l.MaxFunctions, 2)
		if r.err == nil && n != c.defined {
			r.fail(fmt.Errorf("%d function bodies for %d declared functions", n, c.defined))
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			c.body(i)
		}
	case secData:
		n := c.count("data segments", c.l.MaxDataSegments, 2)
		if r.err == nil && c.hasDataCount && n != c.dataCount {
			r.fail(fmt.Errorf("%d data segments for a data count of %d", n, c.dataCount))
		}
		for ; n > 0 && r.err == nil; n-- {
			switch flag := r.u32(); flag {
			case 0:
				r.constExpr()
			case 1:
			case 2:
				r.u32()
				r.constExpr()
			default:
				r.fail(fmt.Errorf("data segment flag %d", flag))
			}
			r.bytes(r.u32())
		}
	}
	return r.err
}

func (c *checker) typeIndex() {
	if i := c.r.u32(); uint64(i) >= c.types && c.r.err == nil {
		c.r.fail(fmt.Errorf("type index %d of %d types", i, c.types))
	}
}

func (c *checker) table() {
	if t := c.r.byte(); t != 0x70 && t != 0x6f && c.r.err == nil {
		c.r.fail(fmt.Errorf("table element type 0x%02x", t))
	}
	min, max, hasMax := c.r.limits()
	if c.r.err != nil {
		return
	}
	if min > c.l.MaxTableElements || (hasMax && max > c.l.MaxTableElements) {
		c.r.fail(fmt.Errorf("a table of %d elements (maximum %d) declared; the limit is %d", min, max, c.l.MaxTableElements))
		return
	}
	c.total(&c.tables, 1, "tables (imported and defined)", c.l.MaxTables)
}

func (c *checker) memory() {
	min, max, hasMax := c.r.limits()
	if c.r.err != nil {
		return
	}
	switch {
	case min > c.l.MaxMemoryPages:
		c.r.fail(fmt.Errorf("a memory of %d pages of 64 KiB declared; the limit is %d", min, c.l.MaxMemoryPages))
	case hasMax && (max < min || max > 65536):
		c.r.fail(fmt.Errorf("a memory of %d to %d pages declared", min, max))
	default:
		c.total(&c.memories, 1, "memories (imported and defined)", c.l.MaxMemories)
	}
}

// elementSegment reads one segment of any of the eight encodings.
func (c *checker) elementSegment() {
	r := &c.r
	flag := r.u32()
	if flag > 7 {
		r.fail(fmt.Errorf("element segment flag %d", flag))
		return
	}
	if flag&1 == 0 { // active
		if flag&2 != 0 {
			r.u32() // table index
		}
		r.constExpr()
	}
	if flag&3 != 0 { // element kind or reference type
		r.byte()
	}
	min := 1 // a function index
	if flag&4 != 0 {
		min = 2 // an expression and its end
	}
	n := c.count("elements in a segment", c.l.MaxElements, min)
	c.total(&c.elements, n, "elements (all element segments)", c.l.MaxElements)
	for ; n > 0 && r.err == nil; n-- {
		if flag&4 != 0 {
			r.constExpr()
		} else {
			r.u32()
		}
	}
}

// body reads a function body's size and its locals, skipping its
// instructions.
func (c *checker) body(i uint64) {
	r := &c.r
	size := r.u32()
	if r.err != nil {
		return
	}
	if uint64(size) > uint64(len(r.b)-r.pos) {
		r.fail(fmt.Errorf("function body %d declares %d bytes, %d are left in the section", i, size, len(r.b)-r.pos))
		return
	}
	end := r.pos + int(size)
	b := reader{b: r.b[:end], pos: r.pos}
	var locals uint64
	for groups := b.u32(); groups > 0 && b.err == nil; groups-- {
		locals += uint64(b.u32())
		b.valueType()
		if b.err == nil && locals > c.l.MaxLocalsPerFunction {
			b.fail(fmt.Errorf("function body %d declares more than %d locals; the limit is %d per function", i, c.l.MaxLocalsPerFunction, c.l.MaxLocalsPerFunction))
		}
	}
	if b.err == nil {
		if b.pos == end {
			b.fail(fmt.Errorf("function body %d has no instructions", i))
		}
		c.locals += locals
		if c.locals > c.l.MaxLocals {
			b.fail(fmt.Errorf("%d locals declared by the functions up to body %d; the limit is %d for the module", c.locals, i, c.l.MaxLocals))
		}
	}
	if b.err != nil {
		r.fail(b.err)
		return
	}
	r.pos = end
}

// custom reads a custom section's name and, for the name section, its
// function and local names.
func (c *checker) custom() {
	r := &c.r
	c.total(&c.customs, 1, "custom sections", c.l.MaxCustomSections)
	name := r.name()
	if r.err != nil || name != "name" {
		r.pos = len(r.b)
		return
	}
	if c.hasName {
		r.fail(errors.New(`a second "name" section`))
		return
	}
	c.hasName = true
	for r.pos < len(r.b) && r.err == nil {
		id := r.byte()
		size := r.u32()
		if r.err == nil && uint64(size) > uint64(len(r.b)-r.pos) {
			r.fail(fmt.Errorf("name subsection %d declares %d bytes, %d are left", id, size, len(r.b)-r.pos))
		}
		if r.err != nil {
			return
		}
		end := r.pos + int(size)
		s := &checker{l: c.l, r: reader{b: r.b[:end], pos: r.pos}}
		s.copyCounts(c)
		switch id {
		case 0: // module name
			s.r.name()
		case 1: // function names
			n := s.count("function names", c.l.MaxNames, 2)
			s.total(&s.names, n, "names", c.l.MaxNames)
			for ; n > 0 && s.r.err == nil; n-- {
				s.r.u32()
				s.r.name()
			}
		case 2: // local names
			n := s.count("functions with local names", c.l.MaxNames, 2)
			for ; n > 0 && s.r.err == nil; n-- {
				s.r.u32()
				m := s.count("local names of a function", c.l.MaxLocalsPerFunction+c.l.MaxParams, 2)
				s.total(&s.names, m, "names", c.l.MaxNames)
				for ; m > 0 && s.r.err == nil; m-- {
					s.r.u32()
					s.r.name()
				}
			}
		default: // other subsections are skipped by the runtime too
			s.r.pos = end
		}
		if s.r.err == nil && s.r.pos != end {
			s.r.fail(fmt.Errorf("name subsection %d: %d bytes left over", id, end-s.r.pos))
		}
		if s.r.err != nil {
			r.fail(fmt.Errorf(`"name" section: %w`, s.r.err))
			return
		}
		c.copyCounts(s)
		c.r.pos = end
	}
}

// reader reads the binary format. Every read checks bounds; the first
// failure sticks in err and later reads return zero values.
type reader struct {
	b   []byte
	pos int
	err error
}

var errEOF = errors.New("unexpected end (truncated)")

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) byte() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail(errEOF)
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil || uint64(n) > uint64(len(r.b)-r.pos) {
		r.fail(errEOF)
		return nil
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s
}

// uleb reads an unsigned LEB128 of at most bits bits.
func (r *reader) uleb(bits uint) uint64 {
	var v uint64
	for shift := uint(0); r.err == nil; shift += 7 {
		if shift >= bits {
			r.fail(errors.New("integer too long"))
			break
		}
		c := r.byte()
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if bits < 64 && v>>bits != 0 {
				r.fail(errors.New("integer too large"))
			}
			break
		}
	}
	return v
}

func (r *reader) u32() uint32 { return uint32(r.uleb(32)) }

// sleb skips a signed LEB128 of at most bits bits.
func (r *reader) sleb(bits uint) {
	for shift := uint(0); r.err == nil; shift += 7 {
		if shift >= bits {
			r.fail(errors.New("integer too long"))
			return
		}
		if r.byte()&0x80 == 0 {
			return
		}
	}
}

// name reads a UTF-8 string (the bytes it declares must be there).
func (r *reader) name() string {
	b := r.bytes(r.u32())
	if r.err == nil && !utf8.Valid(b) {
		r.fail(errors.New("a name is not valid UTF-8"))
	}
	return string(b)
}

func (r *reader) valueType() {
	switch t := r.byte(); t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
	default:
		r.fail(fmt.Errorf("value type 0x%02x", t))
	}
}

func (r *reader) mutability() {
	if m := r.byte(); m > 1 {
		r.fail(fmt.Errorf("global mutability 0x%02x", m))
	}
}

// limits reads a table or memory's limits (no shared or 64-bit
// memories, which the runtime does not enable).
func (r *reader) limits() (min, max uint64, hasMax bool) {
	flag := r.byte()
	if flag > 1 {
		r.fail(fmt.Errorf("limits flag 0x%02x", flag))
		return
	}
	min = uint64(r.u32())
	if flag == 1 {
		max, hasMax = uint64(r.u32()), true
	}
	return
}

// constExpr skips a constant expression up to its end: constants,
// global.get, ref.null, ref.func and the extended-constant arithmetic.
func (r *reader) constExpr() {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b: // end
			return
		case 0x41: // i32.const
			r.sleb(32)
		case 0x42: // i64.const
			r.sleb(64)
		case 0x43:
			r.bytes(4)
		case 0x44:
			r.bytes(8)
		case 0x23, 0xd2: // global.get, ref.func
			r.u32()
		case 0xd0: // ref.null
			r.byte()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // i32/i64 add, sub, mul
		case 0xfd: // v128.const
			if sub := r.u32(); sub != 12 && r.err == nil {
				r.fail(fmt.Errorf("opcode 0xfd %d in a constant expression", sub))
			}
			r.bytes(16)
		default:
			if r.err == nil {
				r.fail(fmt.Errorf("opcode 0x%02x in a constant expression", op))
			}
		}
	}
}
