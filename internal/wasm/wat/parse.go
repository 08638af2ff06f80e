package wat

import (
	"fmt"
	"unicode/utf8"
)

// The module AST. References to other definitions ($names or indices) stay
// symbolic until the whole module is parsed (a function may call one
// defined further down); labels are resolved while parsing (their scope is
// lexical).

type funcType struct{ params, results []valType }

func (t funcType) key() string { return string(t.params) + ":" + string(t.results) }

func (t funcType) String() string {
	s := "("
	for i, p := range t.params {
		if i > 0 {
			s += " "
		}
		s += p.String()
	}
	s += ") -> ("
	for i, r := range t.results {
		if i > 0 {
			s += " "
		}
		s += r.String()
	}
	return s + ")"
}

// ref is a reference to an indexed definition: a $name or a number.
type ref struct {
	name string // "$x", or "" for a numeric index
	idx  uint32
	pos  pos
}

func (r ref) String() string {
	if r.name != "" {
		return r.name
	}
	return fmt.Sprint(r.idx)
}

// typeUse is a function signature: (type x)? (param ...)* (result ...)*.
type typeUse struct {
	pos        pos
	explicit   *ref // (type x), if written
	inline     bool // whether (param) or (result) were written
	sig        funcType
	paramNames []string
	nameSet    map[string]bool // while parsing: the parameter names so far
	idx        uint32          // type index, once resolved
	resolved   funcType
}

type limits struct {
	min, max uint32
	hasMax   bool
}

type local struct {
	name string
	typ  valType
}

type function struct {
	pos      pos
	end      pos // the closing parenthesis
	name     string
	tu       *typeUse
	imported bool
	locals   []local
	body     []instr
}

type table struct {
	pos      pos
	lim      limits
	elemType valType
	imported bool
}

type memory struct {
	pos      pos
	lim      limits
	imported bool
}

type global struct {
	pos      pos
	typ      valType
	mut      bool
	imported bool
	init     []instr
}

// External kinds, as encoded in imports and exports.
const (
	kindFunc   = 0
	kindTable  = 1
	kindMemory = 2
	kindGlobal = 3
)

var kindNames = [...]string{"func", "table", "memory", "global"}

type importDef struct {
	module, name string
	kind         byte
	idx          uint32 // index in the kind's index space
}

type export struct {
	pos  pos
	name string
	kind byte
	ref  ref
}

type elemSeg struct {
	pos      pos
	mode     byte // 0 active, 1 passive, 3 declarative (the binary flag bits)
	table    ref
	offset   []instr
	elemType valType
	funcs    []ref     // "func x*"
	exprs    [][]instr // "reftype (item expr)*", when written so
}

type dataSeg struct {
	pos     pos
	passive bool
	mem     ref
	offset  []instr
	bytes   []byte
}

// space is one index space: the names bound in it and how many entries it has.
type space struct {
	what  string // for messages: "func", "local", ...
	names map[string]uint32
	n     uint32
}

// bind adds an entry (named when name != "") and returns its index.
func (s *space) bind(p *parser, name string, at pos) uint32 {
	if name != "" {
		if s.names == nil {
			s.names = map[string]uint32{}
		}
		if _, dup := s.names[name]; dup {
			p.fail(at, "duplicate %s %s", s.what, name)
		}
		s.names[name] = s.n
	}
	s.n++
	return s.n - 1
}

// resolve returns the index a reference denotes.
func (s *space) resolve(r ref) (uint32, error) {
	if r.name != "" {
		i, ok := s.names[r.name]
		if !ok {
			return 0, errAt(r.pos, "unknown %s %s", s.what, r.name)
		}
		return i, nil
	}
	if s.n == 0 {
		return 0, errAt(r.pos, "unknown %s %d: the module has none", s.what, r.idx)
	}
	if r.idx >= s.n {
		return 0, errAt(r.pos, "%s index %d out of range (%d defined)", s.what, r.idx, s.n)
	}
	return r.idx, nil
}

type module struct {
	types    []funcType
	typeUses []*typeUse // in text order: implicit types are added in this order

	funcs   []*function
	tables  []*table
	mems    []*memory
	globals []*global
	imports []importDef
	exports []export
	start   *ref
	elems   []*elemSeg
	datas   []*dataSeg

	typeSpace, funcSpace, tableSpace, memSpace, globalSpace, elemSpace, dataSpace space

	declared  map[uint32]bool // functions referenced outside function bodies (ref.func may name them)
	dataCount bool            // whether code refers to data segments (memory.init, data.drop)

	firstDef *pos // where the first non-import definition of a func, table, memory or global is
}

// maxDepth bounds the nesting of folded expressions, so hostile input
// cannot exhaust the stack.
const maxDepth = 1000

type parser struct {
	toks  []token
	i     int
	m     *module
	depth int

	// The enclosing blocks while parsing a function body.
	blocks []block
	labels map[string][]int // label name -> positions in blocks, innermost last
}

type block struct {
	op    byte
	label string
	pos   pos
	else_ bool
}

func (p *parser) fail(at pos, format string, args ...any) {
	panic(errAt(at, format, args...))
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekN(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1] // EOF
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// isForm reports whether the next tokens open the S-expression "(kw".
func (p *parser) isForm(kw string) bool {
	return p.peek().kind == tLParen && p.peekN(1).kind == tAtom && p.peekN(1).text == kw
}

func (p *parser) expect(kind tokKind, what string) token {
	t := p.next()
	if t.kind != kind {
		p.fail(t.pos, "expected %s, found %s", what, t)
	}
	return t
}

func (p *parser) lparen() { p.expect(tLParen, "'('") }
func (p *parser) rparen() { p.expect(tRParen, "')'") }

// keyword consumes the atom kw.
func (p *parser) keyword(kw string) {
	t := p.next()
	if t.kind != tAtom || t.text != kw {
		p.fail(t.pos, "expected %q, found %s", kw, t)
	}
}

// open consumes "(kw".
func (p *parser) open(kw string) pos {
	at := p.peek().pos
	p.lparen()
	p.keyword(kw)
	return at
}

func (p *parser) optID() (string, pos) {
	if t := p.peek(); t.kind == tID {
		p.next()
		return t.text, t.pos
	}
	return "", p.peek().pos
}

func (p *parser) str() string { return p.expect(tString, "string").text }

// name checks that an import or export name is valid UTF-8.
func (p *parser) name(at pos, s string) {
	if !utf8.ValidString(s) {
		p.fail(at, "name %q is not valid UTF-8", s)
	}
}

func isNum(t token) bool {
	return t.kind == tAtom && t.text[0] >= '0' && t.text[0] <= '9'
}

func (p *parser) u32() uint32 {
	t := p.next()
	if !isNum(t) {
		p.fail(t.pos, "expected unsigned integer, found %s", t)
	}
	v, err := parseUint(t.text)
	if err != nil || v > 0xFFFFFFFF {
		p.fail(t.pos, "invalid unsigned 32-bit integer %q", t.text)
	}
	return uint32(v)
}

func (p *parser) isRef() bool { t := p.peek(); return t.kind == tID || isNum(t) }

// ref parses a $name or index.
func (p *parser) ref(what string) ref {
	t := p.peek()
	if t.kind == tID {
		p.next()
		return ref{name: t.text, pos: t.pos}
	}
	if !isNum(t) {
		p.fail(t.pos, "expected %s index or $name, found %s", what, t)
	}
	return ref{idx: p.u32(), pos: t.pos}
}

func (p *parser) valType() valType {
	t := p.next()
	if t.kind == tAtom {
		switch t.text {
		case "i32":
			return tI32
		case "i64":
			return tI64
		case "f32":
			return tF32
		case "f64":
			return tF64
		case "funcref":
			return tFuncref
		case "externref":
			return tExternref
		}
	}
	p.fail(t.pos, "expected value type (i32, i64, f32, f64, funcref or externref), found %s", t)
	return 0
}

func (p *parser) refType() valType {
	t := p.next()
	if t.kind == tAtom && (t.text == "funcref" || t.text == "anyfunc") {
		return tFuncref
	}
	if t.kind == tAtom && t.text == "externref" {
		return tExternref
	}
	p.fail(t.pos, "expected funcref or externref, found %s", t)
	return 0
}

// parseModule parses "(module $id? field*)" or a bare sequence of fields.
func parseModule(toks []token) *module {
	p := &parser{toks: toks, m: &module{}}
	m := p.m
	m.typeSpace.what, m.funcSpace.what, m.tableSpace.what = "type", "func", "table"
	m.memSpace.what, m.globalSpace.what = "memory", "global"
	m.elemSpace.what, m.dataSpace.what = "elem segment", "data segment"
	if p.peek().kind == tEOF {
		p.fail(p.peek().pos, "empty input: expected (module ...)")
	}
	wrapped := p.isForm("module")
	if wrapped {
		p.open("module")
		p.optID()
		if t := p.peek(); t.kind == tAtom && (t.text == "binary" || t.text == "quote") {
			p.fail(t.pos, "(module %s ...) is not supported: write the module in text form", t.text)
		}
	}
	for p.peek().kind == tLParen {
		p.field()
	}
	if wrapped {
		p.rparen()
	}
	if t := p.peek(); t.kind != tEOF {
		if wrapped {
			p.fail(t.pos, "expected end of input after the module, found %s", t)
		}
		p.fail(t.pos, "expected '(' to start a module field, found %s", t)
	}
	return m
}

func (p *parser) field() {
	at := p.peek().pos
	p.lparen()
	t := p.next()
	if t.kind != tAtom {
		p.fail(t.pos, "expected a module field (type, import, func, table, memory, global, export, start, elem, data), found %s", t)
	}
	switch t.text {
	case "type":
		p.typeField()
	case "import":
		p.importField(at)
	case "func":
		p.funcField(at)
	case "table":
		p.tableField(at)
	case "memory":
		p.memoryField(at)
	case "global":
		p.globalField(at)
	case "export":
		mod := p.str()
		p.name(at, mod)
		e := p.exportDesc()
		e.name, e.pos = mod, at
		p.m.exports = append(p.m.exports, e)
	case "start":
		if p.m.start != nil {
			p.fail(at, "multiple start functions")
		}
		r := p.ref("func")
		p.m.start = &r
	case "elem":
		p.elemField(at)
	case "data":
		p.dataField(at)
	case "module":
		p.fail(t.pos, "nested modules are not supported")
	default:
		p.fail(t.pos, "unknown module field %q (expected type, import, func, table, memory, global, export, start, elem or data)", t.text)
	}
	p.rparen()
}

func (p *parser) typeField() {
	name, at := p.optID()
	p.open("func")
	var tu typeUse
	p.params(&tu, true)
	p.results(&tu)
	p.rparen()
	p.m.typeSpace.bind(p, name, at)
	p.m.types = append(p.m.types, tu.sig)
}

// params parses (param ...)*: "(param $x t)" or "(param t*)".
func (p *parser) params(tu *typeUse, named bool) {
	for p.isForm("param") {
		tu.inline = true
		p.open("param")
		if t := p.peek(); t.kind == tID {
			if !named {
				p.fail(t.pos, "parameter names are not allowed here")
			}
			p.next()
			if tu.nameSet == nil {
				tu.nameSet = map[string]bool{}
			}
			if tu.nameSet[t.text] {
				p.fail(t.pos, "duplicate parameter %s", t.text)
			}
			tu.nameSet[t.text] = true
			for len(tu.paramNames) < len(tu.sig.params) {
				tu.paramNames = append(tu.paramNames, "")
			}
			tu.paramNames = append(tu.paramNames, t.text)
			tu.sig.params = append(tu.sig.params, p.valType())
		} else {
			for p.peek().kind != tRParen {
				tu.sig.params = append(tu.sig.params, p.valType())
			}
		}
		p.rparen()
	}
}

func (p *parser) results(tu *typeUse) {
	for p.isForm("result") {
		tu.inline = true
		p.open("result")
		for p.peek().kind != tRParen {
			tu.sig.results = append(tu.sig.results, p.valType())
		}
		p.rparen()
	}
}

// typeUse parses (type x)? (param ...)* (result ...)* and records it, so
// that a signature without (type x) gets its implicit type in text order.
func (p *parser) typeUse(named bool) *typeUse {
	tu := p.signature(named)
	p.m.typeUses = append(p.m.typeUses, tu)
	return tu
}

// signature parses (type x)? (param ...)* (result ...)*.
func (p *parser) signature(named bool) *typeUse {
	tu := &typeUse{pos: p.peek().pos}
	if p.isForm("type") {
		p.open("type")
		r := p.ref("type")
		tu.explicit = &r
		p.rparen()
	}
	p.params(tu, named)
	p.results(tu)
	return tu
}

// inlineExports parses (export "name")* for the definition that gets index idx.
func (p *parser) inlineExports(kind byte, idx uint32) {
	for p.isForm("export") {
		at := p.open("export")
		name := p.str()
		p.name(at, name)
		p.rparen()
		p.m.exports = append(p.m.exports, export{pos: at, name: name, kind: kind, ref: ref{idx: idx, pos: at}})
	}
}

// inlineImport parses an optional (import "module" "name").
func (p *parser) inlineImport() (mod, name string, ok bool) {
	if !p.isForm("import") {
		return "", "", false
	}
	p.open("import")
	mod, name = p.str(), p.str()
	p.rparen()
	return mod, name, true
}

// define notes a definition (not an import) of a func, table, memory or global.
func (p *parser) define(at pos) {
	if p.m.firstDef == nil {
		p.m.firstDef = &at
	}
}

// addImport records an import; the spec requires imports to come before
// the module's own functions, tables, memories and globals.
func (p *parser) addImport(at pos, mod, name string, kind byte, idx uint32) {
	if d := p.m.firstDef; d != nil {
		p.fail(at, "imports must come before the module's own definitions (the first is at line %d:%d)", d.line, d.col)
	}
	if mod == "" {
		// Valid WebAssembly, but no module can be instantiated under an
		// empty name (wazero refuses it).
		p.fail(at, "import module name must not be empty")
	}
	p.name(at, mod)
	p.name(at, name)
	p.m.imports = append(p.m.imports, importDef{module: mod, name: name, kind: kind, idx: idx})
}

// wordsBeforeClose counts the tokens other than parentheses up to the
// parenthesis closing the current form: a bound on the number of
// instructions in a function body, so its slice is allocated once.
func (p *parser) wordsBeforeClose() int {
	n, depth := 0, 0
	for _, t := range p.toks[p.i:] {
		switch t.kind {
		case tLParen:
			depth++
		case tRParen:
			if depth == 0 {
				return n
			}
			depth--
		case tEOF:
			return n
		default:
			n++
		}
	}
	return n
}

// idxOf returns the index the next definition in a space will get.
func idxOf(s *space) uint32 { return s.n }

func (p *parser) importField(at pos) {
	mod, name := p.str(), p.str()
	p.lparen()
	t := p.next()
	if t.kind != tAtom {
		p.fail(t.pos, "expected func, table, memory or global in import, found %s", t)
	}
	id, idAt := p.optID()
	switch t.text {
	case "func":
		f := &function{pos: at, name: id, imported: true, tu: p.typeUse(true)}
		p.addImport(at, mod, name, kindFunc, p.m.funcSpace.bind(p, id, idAt))
		p.m.funcs = append(p.m.funcs, f)
	case "table":
		tb := &table{pos: at, lim: p.limits(), elemType: p.refType(), imported: true}
		p.addImport(at, mod, name, kindTable, p.m.tableSpace.bind(p, id, idAt))
		p.m.tables = append(p.m.tables, tb)
	case "memory":
		mem := &memory{pos: at, lim: p.limits(), imported: true}
		p.addImport(at, mod, name, kindMemory, p.m.memSpace.bind(p, id, idAt))
		p.m.mems = append(p.m.mems, mem)
	case "global":
		g := &global{pos: at, imported: true}
		g.typ, g.mut = p.globalType()
		p.addImport(at, mod, name, kindGlobal, p.m.globalSpace.bind(p, id, idAt))
		p.m.globals = append(p.m.globals, g)
	default:
		p.fail(t.pos, "expected func, table, memory or global in import, found %s", t)
	}
	p.rparen()
}

func (p *parser) exportDesc() export {
	p.lparen()
	t := p.next()
	if t.kind != tAtom {
		p.fail(t.pos, "expected func, table, memory or global in export, found %s", t)
	}
	var kind byte
	switch t.text {
	case "func":
		kind = kindFunc
	case "table":
		kind = kindTable
	case "memory":
		kind = kindMemory
	case "global":
		kind = kindGlobal
	default:
		p.fail(t.pos, "expected func, table, memory or global in export, found %s", t)
	}
	r := p.ref(t.text)
	p.rparen()
	return export{kind: kind, ref: r}
}

func (p *parser) limits() limits {
	var l limits
	l.min = p.u32()
	if isNum(p.peek()) {
		l.max, l.hasMax = p.u32(), true
	}
	return l
}

func (p *parser) globalType() (valType, bool) {
	if p.isForm("mut") {
		p.open("mut")
		t := p.valType()
		p.rparen()
		return t, true
	}
	return p.valType(), false
}

// fieldHead is what a func, table, memory or global field starts with.
type fieldHead struct {
	id       string // "" when none
	idAt     pos
	idx      uint32 // the definition's index in its space
	imported bool
}

// fieldHead parses the start of a func, table, memory or global field: an
// optional id, inline exports of the index the definition gets in s, and an
// inline import, recorded as an import (else the field is one of the
// module's own definitions). The caller binds the id in s when done.
func (p *parser) fieldHead(at pos, s *space, kind byte) fieldHead {
	h := fieldHead{idx: idxOf(s)}
	h.id, h.idAt = p.optID()
	p.inlineExports(kind, h.idx)
	mod, name, imported := p.inlineImport()
	if h.imported = imported; imported {
		p.addImport(at, mod, name, kind, h.idx)
	} else {
		p.define(at)
	}
	return h
}

func (p *parser) funcField(at pos) {
	h := p.fieldHead(at, &p.m.funcSpace, kindFunc)
	f := &function{pos: at, name: h.id, imported: h.imported, tu: p.typeUse(true)}
	if !h.imported {
		names := map[string]bool{}
		for _, n := range f.tu.paramNames {
			names[n] = n != ""
		}
		for p.isForm("local") {
			p.open("local")
			if t := p.peek(); t.kind == tID {
				p.next()
				if names[t.text] {
					p.fail(t.pos, "duplicate local %s", t.text)
				}
				names[t.text] = true
				f.locals = append(f.locals, local{name: t.text, typ: p.valType()})
			} else {
				for p.peek().kind != tRParen {
					f.locals = append(f.locals, local{typ: p.valType()})
				}
			}
			p.rparen()
		}
		p.blocks, p.labels = p.blocks[:0], map[string][]int{}
		f.body = p.instrs(make([]instr, 0, p.wordsBeforeClose()))
		f.end = p.peek().pos
	}
	p.m.funcSpace.bind(p, h.id, h.idAt)
	p.m.funcs = append(p.m.funcs, f)
}

func (p *parser) tableField(at pos) {
	h := p.fieldHead(at, &p.m.tableSpace, kindTable)
	tb := &table{pos: at, imported: h.imported}
	if t := p.peek(); !h.imported && t.kind == tAtom && !isNum(t) {
		// (table reftype (elem x*)): a table just big enough, and its segment.
		tb.elemType = p.refType()
		seg := &elemSeg{pos: p.open("elem"), table: ref{idx: h.idx, pos: at}, elemType: tb.elemType}
		seg.offset = []instr{{op: opcodes["i32.const"], pos: at}}
		p.elemItems(seg)
		p.rparen()
		n := uint32(len(seg.funcs) + len(seg.exprs))
		tb.lim = limits{min: n, max: n, hasMax: true}
		p.m.elemSpace.bind(p, "", at)
		p.m.elems = append(p.m.elems, seg)
	} else {
		tb.lim, tb.elemType = p.limits(), p.refType()
	}
	p.m.tableSpace.bind(p, h.id, h.idAt)
	p.m.tables = append(p.m.tables, tb)
}

func (p *parser) memoryField(at pos) {
	h := p.fieldHead(at, &p.m.memSpace, kindMemory)
	mem := &memory{pos: at, imported: h.imported}
	if !h.imported && p.isForm("data") {
		// (memory (data "...")): a memory just big enough, and its segment.
		seg := &dataSeg{pos: p.open("data"), mem: ref{idx: h.idx, pos: at}}
		seg.offset = []instr{{op: opcodes["i32.const"], pos: at}}
		for p.peek().kind == tString {
			seg.bytes = append(seg.bytes, p.str()...)
		}
		p.rparen()
		pages := uint32((uint64(len(seg.bytes)) + 65535) / 65536)
		mem.lim = limits{min: pages, max: pages, hasMax: true}
		p.m.dataSpace.bind(p, "", at)
		p.m.datas = append(p.m.datas, seg)
	} else {
		mem.lim = p.limits()
	}
	if t := p.peek(); t.kind == tAtom && (t.text == "shared" || t.text == "i64") {
		p.fail(t.pos, "%s memories are not supported", t.text)
	}
	p.m.memSpace.bind(p, h.id, h.idAt)
	p.m.mems = append(p.m.mems, mem)
}

func (p *parser) globalField(at pos) {
	h := p.fieldHead(at, &p.m.globalSpace, kindGlobal)
	g := &global{pos: at, imported: h.imported}
	g.typ, g.mut = p.globalType()
	if !h.imported {
		g.init = p.constExpr()
	}
	p.m.globalSpace.bind(p, h.id, h.idAt)
	p.m.globals = append(p.m.globals, g)
}

// constExpr parses the instructions of an initializer (up to the closing
// parenthesis); the validator checks they are constant.
func (p *parser) constExpr() []instr {
	p.blocks, p.labels = p.blocks[:0], map[string][]int{}
	return p.instrs(nil)
}

// offset parses "(offset instr*)" or a single folded instruction.
func (p *parser) offset() []instr {
	if p.isForm("offset") {
		p.open("offset")
		e := p.constExpr()
		p.rparen()
		return e
	}
	if p.peek().kind != tLParen {
		p.fail(p.peek().pos, "expected an offset expression such as (i32.const 0), found %s", p.peek())
	}
	p.blocks, p.labels = p.blocks[:0], map[string][]int{}
	return p.folded(nil)
}

// activeTarget parses where an active elem or data segment goes: "x
// (offset ...)" (WebAssembly 1.0; bareID: x may be an id too), "(table x)"
// or "(memory x)" (space) then the offset, or the offset alone (index 0). A
// segment without any is not active.
func (p *parser) activeTarget(at pos, space string, bareID bool) (target ref, offset []instr, active bool) {
	switch t := p.peek(); {
	case isNum(t) || (bareID && t.kind == tID):
		target = p.ref(space)
	case p.isForm(space):
		p.open(space)
		target = p.ref(space)
		p.rparen()
	case t.kind == tLParen:
		target = ref{pos: at}
	default:
		return ref{}, nil, false
	}
	return target, p.offset(), true
}

func (p *parser) elemField(at pos) {
	id, idAt := p.optID()
	seg := &elemSeg{pos: at}
	var active bool
	if t := p.peek(); t.kind == tAtom && t.text == "declare" {
		p.next()
		seg.mode = 3
	} else if seg.table, seg.offset, active = p.activeTarget(at, "table", false); !active {
		seg.mode = 1
	}
	seg.elemType = tFuncref
	if t := p.peek(); t.kind == tAtom && t.text == "func" {
		p.next()
	} else if t.kind == tAtom && (t.text == "funcref" || t.text == "externref") {
		seg.elemType = p.refType()
		seg.exprs = [][]instr{} // written as expressions, even if none
	} else if seg.mode != 0 {
		p.fail(t.pos, "expected \"func\", \"funcref\" or \"externref\", found %s", t)
	}
	p.elemItems(seg)
	p.m.elemSpace.bind(p, id, idAt)
	p.m.elems = append(p.m.elems, seg)
}

// elemItems parses the elements of a segment: function indices, or
// expressions "(item instr*)" or "(instr)".
func (p *parser) elemItems(seg *elemSeg) {
	for p.isRef() {
		if seg.exprs != nil {
			p.fail(p.peek().pos, "expected an element expression such as (ref.func %s), found %s", p.peek().text, p.peek())
		}
		seg.funcs = append(seg.funcs, p.ref("func"))
	}
	for p.peek().kind == tLParen {
		if len(seg.funcs) > 0 {
			p.fail(p.peek().pos, "expected a function index, found '('")
		}
		if p.isForm("item") {
			p.open("item")
			seg.exprs = append(seg.exprs, p.constExpr())
			p.rparen()
		} else {
			p.blocks, p.labels = p.blocks[:0], map[string][]int{}
			seg.exprs = append(seg.exprs, p.folded(nil))
		}
	}
}

func (p *parser) dataField(at pos) {
	id, idAt := p.optID()
	seg := &dataSeg{pos: at}
	var active bool
	seg.mem, seg.offset, active = p.activeTarget(at, "memory", true)
	seg.passive = !active
	for p.peek().kind == tString {
		seg.bytes = append(seg.bytes, p.str()...)
	}
	p.m.dataSpace.bind(p, id, idAt)
	p.m.datas = append(p.m.datas, seg)
}
