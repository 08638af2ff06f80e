package wat

import "strings"

// instr is one instruction of a function body or initializer, in binary
// (flat) order: folded expressions are flattened while parsing.
type instr struct {
	op    *opInfo
	pos   pos
	ref   ref         // call, local.*, global.*, table.*, call_indirect's table; br/br_if label depth
	tu    *typeUse    // block type, call_indirect type
	val   uint64      // constant bits; memarg offset; ref.null's type
	align uint32      // memarg alignment (log2)
	x     *instrExtra // the immediates few instructions have
}

// instrExtra holds immediates of rarer instructions, keeping instr small
// (a big function body is a long slice of instr).
type instrExtra struct {
	labels []ref     // br_table (depths; the last is the default)
	sel    []valType // select (result t): the typed select
	ref2   ref       // table.copy's source table, table.init's segment
}

// foldedEnd is the end of a folded block, named for messages after what
// the author wrote (a parenthesis, not "end").
var foldedEnd = &opInfo{name: "end of block", code: []byte{opEnd}, imm: immEnd}

// instrs parses instructions up to a closing parenthesis (which it leaves),
// appending them to out. Blocks opened here must be ended here.
func (p *parser) instrs(out []instr) []instr {
	base := len(p.blocks)
	for {
		switch t := p.peek(); t.kind {
		case tRParen, tEOF:
			if len(p.blocks) > base {
				b := p.blocks[len(p.blocks)-1]
				p.fail(b.pos, "%s is missing its end", blockName(b.op))
			}
			return out
		case tLParen:
			out = p.folded(out)
		default:
			out = p.plain(out, base)
		}
	}
}

func blockName(op byte) string {
	switch op {
	case opLoop:
		return "loop"
	case opIf:
		return "if"
	}
	return "block"
}

func (p *parser) opcode(t token) *opInfo {
	if t.kind != tAtom {
		p.fail(t.pos, "expected an instruction, found %s", t)
	}
	op := opcodes[t.text]
	if op == nil {
		if isNum(t) || t.text[0] == '-' || t.text[0] == '+' {
			p.fail(t.pos, "unexpected number %s (immediates follow their instruction, as in i32.const %s)", t.text, t.text)
		}
		if s := suggest(t.text); s != "" {
			p.fail(t.pos, "unknown instruction %q (did you mean %s?)", t.text, s)
		}
		p.fail(t.pos, "unknown instruction %q", t.text)
	}
	return op
}

// suggest returns the instruction name closest to a misspelled one, if
// it is within two edits.
func suggest(name string) string {
	if len(name) > 40 {
		return ""
	}
	best, bestDist := "", 3
	for cand := range opcodes {
		if d := editDistance(name, cand); d < bestDist || d == bestDist && cand < best {
			best, bestDist = cand, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// plain parses one instruction in flat form.
func (p *parser) plain(out []instr, base int) []instr {
	t, in, label := p.head()
	switch in.op.imm {
	case immBlock:
		p.pushBlock(in.op.code[0], label, t.pos)
	case immElse:
		if len(p.blocks) <= base || p.blocks[len(p.blocks)-1].op != opIf || p.blocks[len(p.blocks)-1].else_ {
			p.fail(t.pos, "else without a matching if")
		}
		p.endLabel(p.blocks[len(p.blocks)-1])
		p.blocks[len(p.blocks)-1].else_ = true
	case immEnd:
		if len(p.blocks) <= base {
			p.fail(t.pos, "end without a matching block, loop or if")
		}
		p.endLabel(p.blocks[len(p.blocks)-1])
		p.popBlock()
	default:
		p.immediates(&in)
	}
	return append(out, in)
}

// head parses an instruction's opcode and, for block, loop and if (in
// flat and folded form alike), its optional label and its block type.
func (p *parser) head() (token, instr, string) {
	t := p.next()
	in := instr{op: p.opcode(t), pos: t.pos}
	var label string
	if in.op.imm == immBlock {
		label, _ = p.optID()
		in.tu = p.blockType()
	}
	return t, in, label
}

// endLabel checks the optional label after else or end.
func (p *parser) endLabel(b block) {
	if t := p.peek(); t.kind == tID {
		p.next()
		if t.text != b.label {
			p.fail(t.pos, "label %s does not match the %s's label %q", t.text, blockName(b.op), b.label)
		}
	}
}

func (p *parser) pushBlock(op byte, label string, at pos) {
	if label != "" {
		p.labels[label] = append(p.labels[label], len(p.blocks))
	}
	p.blocks = append(p.blocks, block{op: op, label: label, pos: at})
}

func (p *parser) popBlock() {
	b := p.blocks[len(p.blocks)-1]
	if b.label != "" {
		s := p.labels[b.label]
		p.labels[b.label] = s[:len(s)-1]
	}
	p.blocks = p.blocks[:len(p.blocks)-1]
}

// folded parses one folded instruction "(op imm* folded*)" and appends its
// flat form.
func (p *parser) folded(out []instr) []instr {
	p.depth++
	if p.depth > maxDepth {
		p.fail(p.peek().pos, "expressions nested too deeply (more than %d levels)", maxDepth)
	}
	p.lparen()
	t, in, label := p.head()
	switch in.op.imm {
	case immBlock:
		if in.op.code[0] == opIf {
			for p.peek().kind == tLParen && !p.isForm("then") {
				out = p.folded(out) // the condition
			}
			if !p.isForm("then") {
				p.fail(p.peek().pos, "expected (then ...) in folded if, found %s", p.peek())
			}
			p.pushBlock(opIf, label, t.pos)
			out = append(out, in)
			p.open("then")
			out = p.instrs(out)
			p.rparen()
			if p.isForm("else") {
				at := p.open("else")
				out = append(out, instr{op: opcodes["else"], pos: at})
				out = p.instrs(out)
				p.rparen()
			}
		} else {
			p.pushBlock(in.op.code[0], label, t.pos)
			out = append(out, in)
			out = p.instrs(out)
		}
		p.popBlock()
		end := p.peek().pos
		p.rparen()
		out = append(out, instr{op: foldedEnd, pos: end})
	case immElse, immEnd:
		p.fail(t.pos, "%s cannot be written in folded form", t.text)
	default:
		p.immediates(&in)
		for p.peek().kind == tLParen {
			out = p.folded(out)
		}
		if t := p.peek(); t.kind != tRParen {
			p.fail(t.pos, "expected ')' to close %s (or a folded operand), found %s", in.op.name, t)
		}
		p.next()
		out = append(out, in)
	}
	p.depth--
	return out
}

// blockType parses the type of a block, loop or if. A single result or none
// is encoded inline; anything else refers to a (possibly implicit) type.
func (p *parser) blockType() *typeUse {
	tu := p.signature(false)
	if tu.explicit != nil || len(tu.sig.params) > 0 || len(tu.sig.results) > 1 {
		p.m.typeUses = append(p.m.typeUses, tu)
	} else {
		tu.resolved = tu.sig
	}
	return tu
}

// label parses a label reference and returns it as a relative depth.
func (p *parser) label() ref {
	t := p.peek()
	if t.kind == tID {
		p.next()
		s := p.labels[t.text]
		if len(s) == 0 {
			p.fail(t.pos, "unknown label %s", t.text)
		}
		return ref{idx: uint32(len(p.blocks) - 1 - s[len(s)-1]), pos: t.pos}
	}
	return p.ref("label")
}

// optTable parses an optional table reference: table 0 (at pos) when
// there is none.
func (p *parser) optTable(at pos) ref {
	if p.isRef() {
		return p.ref("table")
	}
	return ref{pos: at}
}

// immediates parses the immediates of a non-block instruction.
func (p *parser) immediates(in *instr) {
	switch in.op.imm {
	case immBr:
		in.ref = p.label()
	case immBrTable:
		in.x = &instrExtra{}
		for p.isRef() {
			in.x.labels = append(in.x.labels, p.label())
		}
		if len(in.x.labels) == 0 {
			p.fail(p.peek().pos, "br_table needs at least one label, found %s", p.peek())
		}
	case immCall:
		in.ref = p.ref("func")
	case immCallIndirect:
		in.ref = p.optTable(in.pos)
		in.tu = p.typeUse(false)
	case immSelect:
		if p.isForm("result") {
			var tu typeUse
			p.results(&tu)
			// "select (result)" with no type is the untyped select.
			if len(tu.sig.results) > 0 {
				in.x = &instrExtra{sel: tu.sig.results}
			}
		}
	case immMemInit, immDataDrop:
		in.ref = p.ref("data segment")
	case immRefNull:
		t := p.next()
		switch {
		case t.kind == tAtom && (t.text == "func" || t.text == "funcref"):
			in.val = uint64(tFuncref)
		case t.kind == tAtom && (t.text == "extern" || t.text == "externref"):
			in.val = uint64(tExternref)
		default:
			p.fail(t.pos, "expected func or extern after ref.null, found %s", t)
		}
	case immRefFunc:
		in.ref = p.ref("func")
	case immTable:
		in.ref = p.optTable(in.pos)
	case immTableCopy:
		in.ref, in.x = ref{pos: in.pos}, &instrExtra{ref2: ref{pos: in.pos}}
		if p.isRef() {
			in.ref, in.x.ref2 = p.ref("table"), p.ref("table")
		}
	case immTableInit:
		in.ref, in.x = ref{pos: in.pos}, &instrExtra{ref2: p.ref("elem segment")}
		if p.isRef() {
			in.ref, in.x.ref2 = in.x.ref2, p.ref("elem segment")
		}
	case immElemDrop:
		in.ref = p.ref("elem segment")
	case immLocal:
		in.ref = p.ref("local")
	case immGlobal:
		in.ref = p.ref("global")
	case immMemArg:
		in.align = in.op.align
		if t := p.peek(); t.kind == tAtom && strings.HasPrefix(t.text, "offset=") {
			p.next()
			v, err := parseUint(t.text[len("offset="):])
			if err != nil || v > 0xFFFFFFFF {
				p.fail(t.pos, "invalid memory offset %q (an unsigned 32-bit integer)", t.text)
			}
			in.val = v
		}
		if t := p.peek(); t.kind == tAtom && strings.HasPrefix(t.text, "align=") {
			p.next()
			v, err := parseUint(t.text[len("align="):])
			if err != nil || v == 0 || v&(v-1) != 0 || v > 1<<31 {
				p.fail(t.pos, "invalid alignment %q (a power of two)", t.text)
			}
			log := uint32(0)
			for v > 1 {
				v >>= 1
				log++
			}
			if log > in.op.align {
				p.fail(t.pos, "alignment of %s must not be larger than its natural alignment %d", in.op.name, 1<<in.op.align)
			}
			in.align = log
		}
	case immI32, immI64, immF32, immF64:
		t := p.next()
		bits, what, parse := 32, "an integer", parseInt
		if in.op.imm == immF32 || in.op.imm == immF64 {
			what, parse = "a number", parseFloat
		}
		if in.op.imm == immI64 || in.op.imm == immF64 {
			bits = 64
		}
		if t.kind != tAtom {
			p.fail(t.pos, "expected %s after %s, found %s", what, in.op.name, t)
		}
		v, err := parse(t.text, bits)
		if err != nil {
			p.fail(t.pos, "invalid %s operand %q: %v", in.op.name, t.text, err)
		}
		in.val = v
	}
}
