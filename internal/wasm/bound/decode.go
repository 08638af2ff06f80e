package bound

import (
	"errors"
	"fmt"
	"math"
)

// module is what Analyze and Guard need of a binary module.
type module struct {
	imports []imported        // imported functions, in index order
	funcs   []function        // defined functions, in index order
	exports map[string]uint32 // exported functions by name
	// code is the code section's extent in the module (from its id byte);
	// every function's body lies inside it
	codeStart, codeEnd int
}

type imported struct{ module, name string }

// reader reads the binary format. Every read checks bounds; the first
// failure sticks in err and later reads return zero values, so callers
// check err once per loop.
type reader struct {
	b   []byte
	pos int
	off int // the offset of b in the module
	err error
}

var errEOF = errors.New("unexpected end of the module")

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

// sub returns a reader of the next n bytes and skips them.
func (r *reader) sub(n uint32) *reader {
	start := r.pos
	b := r.bytes(n)
	return &reader{b: b, off: r.off + start, err: r.err}
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

// sleb reads a signed LEB128 of at most bits bits (the values of constants
// do not matter here, only where the next instruction starts; block types
// need theirs).
func (r *reader) sleb(bits uint) int64 {
	var v int64
	for shift := uint(0); r.err == nil; {
		if shift >= bits {
			r.fail(errors.New("integer too long"))
			break
		}
		c := r.byte()
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			break
		}
	}
	return v
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

// limits reads a table or memory's limits (WebAssembly 2.0: no shared or
// 64-bit memories, which the default runtime rejects).
func (r *reader) limits() {
	flag := r.byte()
	if flag > 1 {
		r.fail(fmt.Errorf("limits flag 0x%02x: %w", flag, errUnknown))
	}
	r.u32()
	if flag == 1 {
		r.u32()
	}
}

// decode reads the sections Analyze needs: imports, function and code
// sections, exports. Other sections are skipped by their size.
func decode(b []byte) (*module, error) {
	r := &reader{b: b}
	if string(r.bytes(8)) != "\x00asm\x01\x00\x00\x00" {
		return nil, errors.New("not a WebAssembly 1.0 binary")
	}
	m := &module{exports: map[string]uint32{}}
	var declared uint32 // function section's count
	for r.pos < len(b) && r.err == nil {
		start := r.pos
		id := r.byte()
		s := r.sub(r.u32())
		switch id {
		case 2:
			m.importSection(s)
		case 3:
			declared = s.u32()
			// the type indices themselves do not matter
			s.pos = len(s.b)
		case 7:
			m.exportSection(s)
		case 10:
			m.codeStart, m.codeEnd = start, r.pos
			m.codeSection(s)
		default:
			// custom, type, table, memory, global, start, element, data,
			// data count: nothing that executes instructions beyond
			// constant expressions (the start function is a defined
			// function, analysed with the others)
			s.pos = len(s.b)
		}
		if s.err == nil && s.pos != len(s.b) {
			s.fail(fmt.Errorf("%d bytes left over", len(s.b)-s.pos))
		}
		if s.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, s.err)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if uint32(len(m.funcs)) != declared {
		return nil, fmt.Errorf("%d functions declared, %d bodies", declared, len(m.funcs))
	}
	return m, nil
}

func (m *module) importSection(r *reader) {
	for n, i := r.u32(), uint32(0); i < n && r.err == nil; i++ {
		mod, name := r.name(), r.name()
		switch kind := r.byte(); kind {
		case 0: // function: type index
			r.u32()
			m.imports = append(m.imports, imported{mod, name})
		case 1: // table: reference type, limits
			r.byte()
			r.limits()
		case 2: // memory
			r.limits()
		case 3: // global: value type, mutability
			r.bytes(2)
		default:
			r.fail(fmt.Errorf("import kind 0x%02x: %w", kind, errUnknown))
		}
	}
}

func (m *module) exportSection(r *reader) {
	for n, i := r.u32(), uint32(0); i < n && r.err == nil; i++ {
		name, kind, idx := r.name(), r.byte(), r.u32()
		if kind == 0 {
			m.exports[name] = idx
		}
	}
}

func (m *module) codeSection(r *reader) {
	for n, i := r.u32(), uint32(0); i < n && r.err == nil; i++ {
		body := r.sub(r.u32())
		f := function{start: body.off, end: body.off + len(body.b)}
		if err := walkBody(body, f.add); err != nil {
			r.fail(fmt.Errorf("function body %d: %w", i, err))
		}
		m.funcs = append(m.funcs, f)
	}
}

// instr is one decoded instruction.
type instr struct {
	off, end int    // its extent in the module
	op       byte   // opcode (0xfc for the prefixed ones)
	callee   uint32 // call's function index
	heavy    bool   // its cost grows with data (memory.grow, bulk memory)
	exits    bool   // may leave the function (return, a branch to its block, its final end)
	targets  uint64 // br_table's labels, its default included
}

// walkBody reads one function body: its locals, then its instructions up
// to the final end, which must be the body's last byte, calling visit
// with each instruction.
func walkBody(r *reader, visit func(instr)) error {
	for groups, i := r.u32(), uint32(0); i < groups && r.err == nil; i++ {
		r.u32()  // count
		r.byte() // value type
	}
	for depth := 1; depth > 0 && r.err == nil; { // the function's own block
		in := instr{off: r.off + r.pos}
		in.op = r.byte()
		switch in.op {
		case 0x02, 0x03, 0x04: // block, loop, if
			r.blockType()
			depth++
		case 0x0b: // end
			depth--
			in.exits = depth == 0
		case 0x0c, 0x0d: // br, br_if label
			in.exits = r.u32() == uint32(depth-1)
		case 0x0e: // br_table labels default
			n := r.u32()
			in.targets = uint64(n) + 1
			for i := uint64(0); i <= uint64(n) && r.err == nil; i++ {
				in.exits = r.u32() == uint32(depth-1) || in.exits
			}
		case 0x0f: // return
			in.exits = true
		case 0x10: // call
			in.callee = r.u32()
		case 0x11: // call_indirect type table
			r.u32()
			r.u32()
		default:
			in.heavy = r.immediates(in.op)
		}
		in.end = r.off + r.pos
		if r.err == nil {
			visit(in)
		}
	}
	if r.err == nil && r.pos != len(r.b) {
		r.fail(errors.New("instructions after the function's end"))
	}
	return r.err
}

// blockType reads a block type: empty, a value type, or a type index.
func (r *reader) blockType() {
	if r.pos < len(r.b) {
		switch r.b[r.pos] {
		case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
			r.pos++
			return
		}
	}
	if v := r.sleb(33); v < 0 || v > math.MaxUint32 {
		r.fail(fmt.Errorf("block type %d: %w", v, errUnknown))
	}
}

// immediates skips the immediates of an instruction other than the
// control and branch instructions walkBody handles, and says whether its cost grows
// with data (memory.grow, bulk memory and table operations). Opcodes are
// those of WebAssembly 2.0 (SIMD included); any other is refused.
func (r *reader) immediates(op byte) (heavy bool) {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x1a || op == 0x1b:
		// unreachable, nop, else, drop, select
	case op == 0x1c: // select t*
		r.bytes(r.u32())
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memarg()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow: memory 0
		r.zero()
		return op == 0x40
	case op == 0x41: // i32.const
		r.sleb(32)
	case op == 0x42: // i64.const
		r.sleb(64)
	case op == 0x43: // f32.const
		r.bytes(4)
	case op == 0x44: // f64.const
		r.bytes(8)
	case op >= 0x45 && op <= 0xc4: // numeric, sign extension
	case op == 0xd0: // ref.null t
		r.byte()
	case op == 0xd1: // ref.is_null
	case op == 0xd2: // ref.func
		r.u32()
	case op == 0xfc:
		return r.prefixed()
	case op == 0xfd:
		r.simd()
	default:
		r.fail(fmt.Errorf("opcode 0x%02x: %w", op, errUnknown))
	}
	return false
}

// memarg reads a load or store's memory argument: alignment, offset.
func (r *reader) memarg() {
	if align := r.u32(); align >= 64 { // a memory index (multi-memory)
		r.fail(fmt.Errorf("memory argument alignment %d: %w", align, errUnknown))
	}
	r.u32()
}

// simd skips a 0xfd instruction of WebAssembly 2.0's fixed-width SIMD
// (constant cost each); relaxed SIMD (0x100 on), which the runtime does
// not enable, is unknown.
func (r *reader) simd() {
	switch sub := r.u32(); {
	case sub <= 0x0b, sub == 0x5c, sub == 0x5d: // loads, store, load_zero
		r.memarg()
	case sub == 0x0c, sub == 0x0d: // v128.const, i8x16.shuffle: 16 bytes
		r.bytes(16)
	case sub >= 0x15 && sub <= 0x22: // extract_lane, replace_lane
		r.byte()
	case sub >= 0x54 && sub <= 0x5b: // load_lane, store_lane
		r.memarg()
		r.byte()
	case sub > 0xff:
		r.fail(fmt.Errorf("opcode 0xfd %d: %w", sub, errUnknown))
	}
}

// zero reads the reserved memory index byte of memory instructions.
func (r *reader) zero() {
	if c := r.byte(); c != 0 {
		r.fail(fmt.Errorf("memory index %d: %w", c, errUnknown))
	}
}

// prefixed skips a 0xfc instruction (saturating truncation, bulk memory,
// table instructions).
func (r *reader) prefixed() (heavy bool) {
	switch sub := r.u32(); sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // trunc_sat
	case 8: // memory.init data memory
		r.u32()
		r.zero()
		return true
	case 9, 13: // data.drop, elem.drop
		r.u32()
	case 10: // memory.copy
		r.zero()
		r.zero()
		return true
	case 11: // memory.fill
		r.zero()
		return true
	case 12, 14: // table.init elem table, table.copy table table
		r.u32()
		r.u32()
		return true
	case 15, 17: // table.grow, table.fill
		r.u32()
		return true
	case 16: // table.size
		r.u32()
	default:
		r.fail(fmt.Errorf("opcode 0xfc %d: %w", sub, errUnknown))
	}
	return false
}
