package wat

import "strings"

// checker validates function bodies while encoding them, with the
// algorithm of the spec's validation appendix: a stack of operand types and
// a stack of control frames.
type checker struct {
	m      *module
	locals []valType
	names  map[string]uint32 // local names
	vals   []valType
	ctrls  []ctrlFrame
	code   []byte
}

type ctrlFrame struct {
	op              byte
	params, results []valType
	height          int
	unreachable     bool
}

func (c *checker) push(t valType) { c.vals = append(c.vals, t) }

func (c *checker) pushAll(ts []valType) { c.vals = append(c.vals, ts...) }

// pop pops an operand of type want (tUnknown: any type) for instruction in.
func (c *checker) pop(in *instr, want valType) valType {
	f := &c.ctrls[len(c.ctrls)-1]
	if len(c.vals) == f.height {
		if f.unreachable {
			return tUnknown
		}
		if want == tUnknown {
			fail(in.pos, "type mismatch in %s: expected an operand, but the stack is empty", in.op.name)
		}
		fail(in.pos, "type mismatch in %s: expected %s, but the stack is empty", in.op.name, want)
	}
	t := c.vals[len(c.vals)-1]
	c.vals = c.vals[:len(c.vals)-1]
	if t != want && t != tUnknown && want != tUnknown {
		fail(in.pos, "type mismatch in %s: expected %s, got %s", in.op.name, want, t)
	}
	return t
}

func (c *checker) popAll(in *instr, ts []valType) []valType {
	popped := make([]valType, len(ts))
	for i := len(ts) - 1; i >= 0; i-- {
		popped[i] = c.pop(in, ts[i])
	}
	return popped
}

func (c *checker) pushCtrl(op byte, params, results []valType) {
	c.ctrls = append(c.ctrls, ctrlFrame{op: op, params: params, results: results, height: len(c.vals)})
	c.pushAll(params)
}

func (c *checker) popCtrl(in *instr, what string) ctrlFrame {
	f := c.ctrls[len(c.ctrls)-1]
	c.popAll(in, f.results)
	if len(c.vals) != f.height {
		fail(in.pos, "type mismatch at %s: %d more value(s) on the stack than the block's results %s", what, len(c.vals)-f.height, typeList(f.results))
	}
	c.ctrls = c.ctrls[:len(c.ctrls)-1]
	return f
}

func (c *checker) setUnreachable() {
	f := &c.ctrls[len(c.ctrls)-1]
	c.vals = c.vals[:f.height]
	f.unreachable = true
}

func labelTypes(f *ctrlFrame) []valType {
	if f.op == opLoop {
		return f.params
	}
	return f.results
}

// labelFrame returns the frame a branch to depth r targets.
func (c *checker) labelFrame(r ref) *ctrlFrame {
	if r.idx >= uint32(len(c.ctrls)) {
		fail(r.pos, "unknown label: depth %d but only %d enclosing block(s)", r.idx, len(c.ctrls))
	}
	return &c.ctrls[len(c.ctrls)-1-int(r.idx)]
}

func typeList(ts []valType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

func (c *checker) local(r ref) uint32 {
	if r.name != "" {
		i, ok := c.names[r.name]
		if !ok {
			fail(r.pos, "unknown local %s", r.name)
		}
		return i
	}
	if r.idx >= uint32(len(c.locals)) {
		fail(r.pos, "local index %d out of range (%d params and locals)", r.idx, len(c.locals))
	}
	return r.idx
}

func (c *checker) needMemory(in *instr) {
	if len(c.m.mems) == 0 {
		fail(in.pos, "%s needs a memory, but the module has none", in.op.name)
	}
}

// function validates and encodes one function body (locals and code).
func (c *checker) function(f *function) []byte {
	t := f.tu.resolved
	c.locals = append(c.locals[:0], t.params...)
	c.names = map[string]uint32{}
	for i, n := range f.tu.paramNames {
		if n != "" {
			c.names[n] = uint32(i)
		}
	}
	for _, l := range f.locals {
		if l.name != "" {
			c.names[l.name] = uint32(len(c.locals))
		}
		c.locals = append(c.locals, l.typ)
	}

	// Locals as runs of one type.
	var code []byte
	var runs int
	for i := range f.locals {
		if i == 0 || f.locals[i].typ != f.locals[i-1].typ {
			runs++
		}
	}
	code = appendULEB(code, uint64(runs))
	for i := 0; i < len(f.locals); {
		j := i
		for j < len(f.locals) && f.locals[j].typ == f.locals[i].typ {
			j++
		}
		code = append(appendULEB(code, uint64(j-i)), byte(f.locals[i].typ))
		i = j
	}

	c.code = code
	c.vals = c.vals[:0]
	c.ctrls = c.ctrls[:0]
	c.pushCtrl(opBlock, nil, t.results)
	for i := range f.body {
		c.instr(&f.body[i])
	}
	end := instr{op: &opInfo{name: "function end"}, pos: f.end}
	c.popCtrl(&end, "the end of the function")
	return append(c.code, opEnd)
}

func (c *checker) instr(in *instr) {
	op := in.op
	switch {
	case op.imm == immSelect && in.x != nil:
		c.code = append(c.code, 0x1C)
	case op.imm >= immI32:
		c.code = encodeConst(c.code, *in)
	default:
		c.code = append(c.code, op.code...)
	}
	switch op.imm {
	case immNone, immI32, immI64, immF32, immF64:
		c.popAll(in, op.params)
		c.pushAll(op.results)

	case immMemArg:
		c.needMemory(in)
		c.code = appendULEB(appendULEB(c.code, uint64(in.align)), in.val)
		c.popAll(in, op.params)
		c.pushAll(op.results)
	case immMemory:
		c.needMemory(in)
		c.code = append(c.code, 0)
		c.popAll(in, op.params)
		c.pushAll(op.results)
	case immMemCopy:
		c.needMemory(in)
		c.code = append(c.code, 0, 0)
		c.popAll(in, op.params)

	case immMemInit, immDataDrop:
		di := must(c.m.dataSpace.resolve(in.ref))
		c.m.dataCount = true
		c.code = appendULEB(c.code, uint64(di))
		if op.imm == immMemInit {
			c.needMemory(in)
			c.code = append(c.code, 0)
		}
		c.popAll(in, op.params)

	case immRefNull:
		c.code = append(c.code, byte(in.val))
		c.push(valType(in.val))
	case immRefIsNull:
		if t := c.pop(in, tUnknown); t != tUnknown && !t.isRef() {
			fail(in.pos, "type mismatch in ref.is_null: expected a reference, got %s", t)
		}
		c.push(tI32)
	case immRefFunc:
		fi := must(c.m.funcSpace.resolve(in.ref))
		if !c.m.declared[fi] {
			fail(in.pos, "ref.func %s: the function must also be referenced outside function bodies, e.g. in (elem declare func %s) or an export", in.ref, in.ref)
		}
		c.code = appendULEB(c.code, uint64(fi))
		c.push(tFuncref)
	case immTable:
		ti := must(c.m.tableSpace.resolve(in.ref))
		c.code = appendULEB(c.code, uint64(ti))
		t := c.m.tables[ti].elemType
		switch op.name {
		case "table.get":
			c.pop(in, tI32)
			c.push(t)
		case "table.set":
			c.pop(in, t)
			c.pop(in, tI32)
		case "table.size":
			c.push(tI32)
		case "table.grow":
			c.pop(in, tI32)
			c.pop(in, t)
			c.push(tI32)
		case "table.fill":
			c.pop(in, tI32)
			c.pop(in, t)
			c.pop(in, tI32)
		}
	case immTableCopy:
		dst, src := must(c.m.tableSpace.resolve(in.ref)), must(c.m.tableSpace.resolve(in.x.ref2))
		if c.m.tables[dst].elemType != c.m.tables[src].elemType {
			fail(in.pos, "table.copy between tables of different element types")
		}
		c.code = appendULEB(appendULEB(c.code, uint64(dst)), uint64(src))
		c.popAll(in, op.params)
	case immTableInit:
		ti, ei := must(c.m.tableSpace.resolve(in.ref)), must(c.m.elemSpace.resolve(in.x.ref2))
		if c.m.tables[ti].elemType != c.m.elems[ei].elemType {
			fail(in.pos, "table.init: segment of %s into a table of %s", c.m.elems[ei].elemType, c.m.tables[ti].elemType)
		}
		c.code = appendULEB(appendULEB(c.code, uint64(ei)), uint64(ti))
		c.popAll(in, op.params)
	case immElemDrop:
		c.code = appendULEB(c.code, uint64(must(c.m.elemSpace.resolve(in.ref))))

	case immUnreachable:
		c.setUnreachable()

	case immBlock:
		t := in.tu.resolved
		switch {
		case len(t.params) == 0 && len(t.results) == 0:
			c.code = append(c.code, 0x40)
		case len(t.params) == 0 && len(t.results) == 1:
			c.code = append(c.code, byte(t.results[0]))
		default:
			c.code = appendSLEB(c.code, int64(in.tu.idx))
		}
		if op.code[0] == opIf {
			c.pop(in, tI32)
		}
		c.popAll(in, t.params)
		c.pushCtrl(op.code[0], t.params, t.results)

	case immElse:
		f := c.popCtrl(in, "else")
		c.pushCtrl(opElse, f.params, f.results)

	case immEnd:
		f := c.popCtrl(in, in.op.name)
		if f.op == opIf && typeList(f.params) != typeList(f.results) {
			fail(in.pos, "if without else must have the same parameter and result types, but it has %s -> %s", typeList(f.params), typeList(f.results))
		}
		c.pushAll(f.results)

	case immBr:
		target := labelTypes(c.labelFrame(in.ref))
		c.code = appendULEB(c.code, uint64(in.ref.idx))
		if op.code[0] == 0x0D { // br_if
			c.pop(in, tI32)
			c.popAll(in, target)
			c.pushAll(target)
		} else {
			c.popAll(in, target)
			c.setUnreachable()
		}

	case immBrTable:
		labels := in.x.labels
		c.code = appendULEB(c.code, uint64(len(labels)-1))
		for _, l := range labels {
			c.code = appendULEB(c.code, uint64(l.idx))
		}
		c.pop(in, tI32)
		def := labelTypes(c.labelFrame(labels[len(labels)-1]))
		for _, l := range labels {
			lt := labelTypes(c.labelFrame(l))
			if len(lt) != len(def) {
				fail(l.pos, "br_table targets must have the same number of results: label %d has %d, the default has %d", l.idx, len(lt), len(def))
			}
			c.pushAll(c.popAll(in, lt))
		}
		c.popAll(in, def)
		c.setUnreachable()

	case immReturn:
		c.popAll(in, c.ctrls[0].results)
		c.setUnreachable()

	case immCall:
		fi := must(c.m.funcSpace.resolve(in.ref))
		c.code = appendULEB(c.code, uint64(fi))
		t := c.m.funcs[fi].tu.resolved
		c.popAll(in, t.params)
		c.pushAll(t.results)

	case immCallIndirect:
		ti := must(c.m.tableSpace.resolve(in.ref))
		if c.m.tables[ti].elemType != tFuncref {
			fail(in.pos, "call_indirect needs a funcref table")
		}
		c.code = appendULEB(appendULEB(c.code, uint64(in.tu.idx)), uint64(ti))
		c.pop(in, tI32)
		t := in.tu.resolved
		c.popAll(in, t.params)
		c.pushAll(t.results)

	case immDrop:
		c.pop(in, tUnknown)

	case immSelect:
		c.pop(in, tI32)
		if in.x != nil {
			sel := in.x.sel
			if len(sel) != 1 {
				fail(in.pos, "select takes exactly one result type")
			}
			c.code = append(appendULEB(c.code, 1), byte(sel[0]))
			c.pop(in, sel[0])
			c.pop(in, sel[0])
			c.push(sel[0])
			break
		}
		t1 := c.pop(in, tUnknown)
		t2 := c.pop(in, t1)
		if t1 == tUnknown {
			t1 = t2
		}
		if t1.isRef() {
			fail(in.pos, "select of references needs a type: select (result %s)", t1)
		}
		c.push(t1)

	case immLocal:
		li := c.local(in.ref)
		c.code = appendULEB(c.code, uint64(li))
		t := c.locals[li]
		switch op.code[0] {
		case 0x20: // local.get
			c.push(t)
		case 0x21: // local.set
			c.pop(in, t)
		default: // local.tee
			c.pop(in, t)
			c.push(t)
		}

	case immGlobal:
		gi := must(c.m.globalSpace.resolve(in.ref))
		c.code = appendULEB(c.code, uint64(gi))
		g := c.m.globals[gi]
		if op.code[0] == 0x23 {
			c.push(g.typ)
		} else {
			if !g.mut {
				fail(in.pos, "global.set of immutable global %s", in.ref)
			}
			c.pop(in, g.typ)
		}
	}
}
