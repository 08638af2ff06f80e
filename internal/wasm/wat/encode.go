package wat

import "encoding/binary"

// Section ids of the binary format.
const (
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElem      = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

const maxPages = 65536 // 4 GiB of 64 KiB pages

// maxTableSize is wazero's limit on a table's initial size.
const maxTableSize = 1 << 27

func appendULEB(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	return append(appendULEB(b, uint64(len(s))), s...)
}

func appendTypes(b []byte, ts []valType) []byte {
	b = appendULEB(b, uint64(len(ts)))
	for _, t := range ts {
		b = append(b, byte(t))
	}
	return b
}

func appendLimits(b []byte, l limits) []byte {
	if l.hasMax {
		return appendULEB(appendULEB(append(b, 1), uint64(l.min)), uint64(l.max))
	}
	return appendULEB(append(b, 0), uint64(l.min))
}

func appendSection(out []byte, id byte, content []byte) []byte {
	out = append(out, id)
	out = appendULEB(out, uint64(len(content)))
	return append(out, content...)
}

// must turns a resolution error into the parser's panic.
func must(i uint32, err error) uint32 {
	if err != nil {
		panic(err)
	}
	return i
}

func fail(at pos, format string, args ...any) {
	panic(errAt(at, format, args...))
}

// resolveTypes gives every type use its index, appending the implicit types
// of signatures written inline (without (type x)) in the order they occur,
// reusing the first identical type if there is one.
func (m *module) resolveTypes() {
	first := map[string]uint32{}
	for i, t := range m.types {
		if _, ok := first[t.key()]; !ok {
			first[t.key()] = uint32(i)
		}
	}
	for _, tu := range m.typeUses {
		if tu.explicit != nil {
			tu.idx = must(m.typeSpace.resolve(*tu.explicit))
			tu.resolved = m.types[tu.idx]
			if tu.inline && tu.sig.key() != tu.resolved.key() {
				fail(tu.pos, "inline signature %s does not match type %s %s", tu.sig, tu.explicit, tu.resolved)
			}
			continue
		}
		k := tu.sig.key()
		i, ok := first[k]
		if !ok {
			i = uint32(len(m.types))
			m.types = append(m.types, tu.sig)
			first[k] = i
		}
		tu.idx, tu.resolved = i, tu.sig
	}
}

// encode validates the module and returns its binary form.
func (m *module) encode() []byte {
	m.resolveTypes()
	m.declared = map[uint32]bool{}
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	var b []byte

	if len(m.types) > 0 {
		b = appendULEB(b[:0], uint64(len(m.types)))
		for _, t := range m.types {
			b = appendTypes(append(b, 0x60), t.params)
			b = appendTypes(b, t.results)
		}
		out = appendSection(out, secType, b)
	}

	for _, t := range m.tables {
		if t.lim.min > maxTableSize {
			fail(t.pos, "table size %d is over the limit of %d elements", t.lim.min, maxTableSize)
		}
		if t.lim.hasMax && t.lim.max < t.lim.min {
			fail(t.pos, "table size minimum %d is larger than its maximum %d", t.lim.min, t.lim.max)
		}
	}
	if len(m.mems) > 1 {
		fail(m.mems[1].pos, "more than one memory: multiple memories are not supported")
	}
	for _, mem := range m.mems {
		switch {
		case mem.lim.min > maxPages:
			fail(mem.pos, "memory size %d pages is over the limit of %d (4 GiB)", mem.lim.min, maxPages)
		case mem.lim.hasMax && mem.lim.max > maxPages:
			fail(mem.pos, "memory maximum %d pages is over the limit of %d (4 GiB)", mem.lim.max, maxPages)
		case mem.lim.hasMax && mem.lim.max < mem.lim.min:
			fail(mem.pos, "memory size minimum %d is larger than its maximum %d", mem.lim.min, mem.lim.max)
		}
	}

	if len(m.imports) > 0 {
		b = appendULEB(b[:0], uint64(len(m.imports)))
		for _, imp := range m.imports {
			b = appendName(appendName(b, imp.module), imp.name)
			b = append(b, imp.kind)
			switch imp.kind {
			case kindFunc:
				b = appendULEB(b, uint64(m.funcs[imp.idx].tu.idx))
			case kindTable:
				t := m.tables[imp.idx]
				b = appendLimits(append(b, byte(t.elemType)), t.lim)
			case kindMemory:
				b = appendLimits(b, m.mems[imp.idx].lim)
			case kindGlobal:
				g := m.globals[imp.idx]
				b = append(b, byte(g.typ), boolByte(g.mut))
			}
		}
		out = appendSection(out, secImport, b)
	}

	var defined []*function
	for _, f := range m.funcs {
		if !f.imported {
			defined = append(defined, f)
		}
	}
	if len(defined) > 0 {
		b = appendULEB(b[:0], uint64(len(defined)))
		for _, f := range defined {
			b = appendULEB(b, uint64(f.tu.idx))
		}
		out = appendSection(out, secFunction, b)
	}

	if n := countDefined(m.tables, func(t *table) bool { return !t.imported }); n > 0 {
		b = appendULEB(b[:0], uint64(n))
		for _, t := range m.tables {
			if !t.imported {
				b = appendLimits(append(b, byte(t.elemType)), t.lim)
			}
		}
		out = appendSection(out, secTable, b)
	}

	if n := countDefined(m.mems, func(t *memory) bool { return !t.imported }); n > 0 {
		b = appendULEB(b[:0], uint64(n))
		for _, mem := range m.mems {
			if !mem.imported {
				b = appendLimits(b, mem.lim)
			}
		}
		out = appendSection(out, secMemory, b)
	}

	if n := countDefined(m.globals, func(g *global) bool { return !g.imported }); n > 0 {
		b = appendULEB(b[:0], uint64(n))
		for _, g := range m.globals {
			if !g.imported {
				b = append(b, byte(g.typ), boolByte(g.mut))
				b = m.constExpr(b, g.init, g.typ, g.pos, "global initializer")
			}
		}
		out = appendSection(out, secGlobal, b)
	}

	if len(m.exports) > 0 {
		seen := map[string]bool{}
		b = appendULEB(b[:0], uint64(len(m.exports)))
		for _, e := range m.exports {
			if seen[e.name] {
				fail(e.pos, "duplicate export name %q", e.name)
			}
			seen[e.name] = true
			b = append(appendName(b, e.name), e.kind)
			i := must(m.space(e.kind).resolve(e.ref))
			if e.kind == kindFunc {
				m.declared[i] = true
			}
			b = appendULEB(b, uint64(i))
		}
		out = appendSection(out, secExport, b)
	}

	if m.start != nil {
		i := must(m.funcSpace.resolve(*m.start))
		if t := m.funcs[i].tu.resolved; len(t.params) != 0 || len(t.results) != 0 {
			fail(m.start.pos, "start function must take no parameters and return nothing, but %s has type %s", m.start, t)
		}
		out = appendSection(out, secStart, appendULEB(b[:0], uint64(i)))
	}

	if len(m.elems) > 0 {
		b = appendULEB(b[:0], uint64(len(m.elems)))
		for _, e := range m.elems {
			b = m.elemSeg(b, e)
		}
		out = appendSection(out, secElem, b)
	}

	if len(defined) > 0 {
		code := appendULEB(nil, uint64(len(defined)))
		c := &checker{m: m}
		for _, f := range defined {
			body := c.function(f)
			code = append(appendULEB(code, uint64(len(body))), body...)
		}
		// The data count section precedes the code, but only code using
		// memory.init or data.drop needs it (wat2wasm omits it otherwise).
		if m.dataCount {
			out = appendSection(out, secDataCount, appendULEB(b[:0], uint64(len(m.datas))))
		}
		out = appendSection(out, secCode, code)
	}

	if len(m.datas) > 0 {
		b = appendULEB(b[:0], uint64(len(m.datas)))
		for _, d := range m.datas {
			if d.passive {
				b = append(b, 1)
			} else {
				mi := must(m.memSpace.resolve(d.mem))
				if mi == 0 {
					b = append(b, 0)
				} else {
					b = appendULEB(append(b, 2), uint64(mi))
				}
				b = m.constExpr(b, d.offset, tI32, d.pos, "data segment offset")
			}
			b = append(appendULEB(b, uint64(len(d.bytes))), d.bytes...)
		}
		out = appendSection(out, secData, b)
	}
	return out
}

// elemSeg encodes an element segment. Like wat2wasm, a funcref segment
// whose expressions are all ref.func is encoded as a list of indices.
func (m *module) elemSeg(b []byte, e *elemSeg) []byte {
	funcs, asExprs := e.funcs, e.elemType != tFuncref
	for _, x := range e.exprs {
		if len(x) != 1 || x[0].op.imm != immRefFunc {
			asExprs = true
		}
		if !asExprs {
			funcs = append(funcs, x[0].ref)
		}
	}
	flags := e.mode
	var ti uint32
	if e.mode == 0 {
		ti = must(m.tableSpace.resolve(e.table))
		if m.tables[ti].elemType != e.elemType {
			fail(e.pos, "elem segment of %s for a table of %s", e.elemType, m.tables[ti].elemType)
		}
		if ti != 0 {
			flags = 2
		}
	}
	if asExprs {
		flags |= 4
	}
	b = append(b, flags)
	if flags&2 != 0 && e.mode == 0 {
		b = appendULEB(b, uint64(ti))
	}
	if e.mode == 0 {
		b = m.constExpr(b, e.offset, tI32, e.pos, "elem segment offset")
	}
	if flags&3 != 0 {
		if asExprs {
			b = append(b, byte(e.elemType))
		} else {
			b = append(b, 0x00) // elemkind: funcref
		}
	}
	if asExprs {
		b = appendULEB(b, uint64(len(e.exprs)))
		for _, x := range e.exprs {
			b = m.constExpr(b, x, e.elemType, e.pos, "element expression")
		}
		return b
	}
	b = appendULEB(b, uint64(len(funcs)))
	for _, r := range funcs {
		i := must(m.funcSpace.resolve(r))
		m.declared[i] = true
		b = appendULEB(b, uint64(i))
	}
	return b
}

func (m *module) space(kind byte) *space {
	switch kind {
	case kindFunc:
		return &m.funcSpace
	case kindTable:
		return &m.tableSpace
	case kindMemory:
		return &m.memSpace
	}
	return &m.globalSpace
}

func countDefined[T any](xs []T, f func(T) bool) int {
	n := 0
	for _, x := range xs {
		if f(x) {
			n++
		}
	}
	return n
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// constExpr validates and encodes an initializer: one constant instruction
// of the wanted type (a *.const, or global.get of an imported immutable
// global).
func (m *module) constExpr(b []byte, code []instr, want valType, at pos, what string) []byte {
	if len(code) != 1 {
		fail(at, "%s must be a single constant instruction such as (i32.const 0), found %d instructions", what, len(code))
	}
	in := code[0]
	var got valType
	switch in.op.imm {
	case immI32, immI64, immF32, immF64:
		got = in.op.results[0]
		b = encodeConst(b, in)
	case immRefNull:
		got = valType(in.val)
		b = append(b, 0xD0, byte(got))
	case immRefFunc:
		fi := must(m.funcSpace.resolve(in.ref))
		m.declared[fi] = true
		got = tFuncref
		b = appendULEB(append(b, 0xD2), uint64(fi))
	case immGlobal:
		if in.op.name != "global.get" {
			fail(in.pos, "%s is not allowed in a %s", in.op.name, what)
		}
		gi := must(m.globalSpace.resolve(in.ref))
		g := m.globals[gi]
		if !g.imported || g.mut {
			fail(in.pos, "%s may only read an imported immutable global, and %s is not one", what, in.ref)
		}
		got = g.typ
		b = appendULEB(append(b, 0x23), uint64(gi))
	default:
		fail(in.pos, "%s is not a constant instruction (allowed in a %s: i32.const, i64.const, f32.const, f64.const, ref.null, ref.func, global.get)", in.op.name, what)
	}
	if got != want {
		fail(in.pos, "type mismatch in %s: expected %s, got %s", what, want, got)
	}
	return append(b, opEnd)
}

func encodeConst(b []byte, in instr) []byte {
	b = append(b, in.op.code...)
	switch in.op.imm {
	case immI32:
		return appendSLEB(b, int64(int32(uint32(in.val))))
	case immI64:
		return appendSLEB(b, int64(in.val))
	case immF32:
		return binary.LittleEndian.AppendUint32(b, uint32(in.val))
	}
	return binary.LittleEndian.AppendUint64(b, in.val)
}
