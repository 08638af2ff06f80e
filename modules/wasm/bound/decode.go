package bound

import (
	"errors"
	"fmt"
	"math"
)

// module is what Analyze needs of a binary module.
type module struct {
	imports []imported        // imported functions, in index order
	funcs   []function        // defined functions, in index order
	exports map[string]uint32 // exported functions by name
}

type imported struct{ module, name string }

// reader reads the binary format; every read checks bounds.
type reader struct {
	b   []byte
	pos int
	off int // the offset of b in the module (for tests' instruction traces)
}

// sub returns a reader of the next n bytes and skips them.
func (r *reader) sub(n uint32) (*reader, error) {
	start := r.pos
	b, err := r.bytes(n)
	if err != nil {
		return nil, err
	}
	return &reader{b: b, off: r.off + start}, nil
}

var errEOF = errors.New("unexpected end of the module")

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errEOF
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(n) > uint64(len(r.b)-r.pos) {
		return nil, errEOF
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, nil
}

// uleb reads an unsigned LEB128 of at most bits bits.
func (r *reader) uleb(bits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= bits {
			return 0, errors.New("integer too long")
		}
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if bits < 64 && v>>bits != 0 {
				return 0, errors.New("integer too large")
			}
			return v, nil
		}
	}
}

func (r *reader) u32() (uint32, error) {
	v, err := r.uleb(32)
	return uint32(v), err
}

// sleb skips a signed LEB128 of at most bits bits (the values of constants
// do not matter here, only where the next instruction starts); it returns
// the value for block types.
func (r *reader) sleb(bits uint) (int64, error) {
	var v int64
	var shift uint
	for {
		if shift >= bits {
			return 0, errors.New("integer too long")
		}
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
	}
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	return string(b), err
}

// limits reads a table or memory's limits (WebAssembly 2.0: no shared or
// 64-bit memories, which the default runtime rejects).
func (r *reader) limits() error {
	flag, err := r.byte()
	if err != nil {
		return err
	}
	if flag > 1 {
		return fmt.Errorf("limits flag 0x%02x: %w", flag, errUnknown)
	}
	if _, err := r.u32(); err != nil {
		return err
	}
	if flag == 1 {
		_, err = r.u32()
	}
	return err
}

// decode reads the sections Analyze needs: imports, function and code
// sections, exports. Other sections are skipped by their size.
// visit, when not nil, is called with the module offset of every
// instruction decoded (tests compare them with a disassembler's).
func decode(b []byte, visit func(int)) (*module, error) {
	r := &reader{b: b}
	head, err := r.bytes(8)
	if err != nil || string(head) != "\x00asm\x01\x00\x00\x00" {
		return nil, errors.New("not a WebAssembly 1.0 binary")
	}
	m := &module{exports: map[string]uint32{}}
	var declared uint32 // function section's count
	for r.pos < len(b) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		s, err := r.sub(size)
		if err != nil {
			return nil, err
		}
		switch id {
		case 2:
			err = m.importSection(s)
		case 3:
			declared, err = s.u32()
			// the type indices themselves do not matter
			s.pos = len(s.b)
		case 7:
			err = m.exportSection(s)
		case 10:
			err = m.codeSection(s, visit)
		default:
			// custom, type, table, memory, global, start, element, data,
			// data count: nothing that executes instructions beyond
			// constant expressions (the start function is a defined
			// function, analysed with the others)
			s.pos = len(s.b)
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		if s.pos != len(s.b) {
			return nil, fmt.Errorf("section %d: %d bytes left over", id, len(s.b)-s.pos)
		}
	}
	if uint32(len(m.funcs)) != declared {
		return nil, fmt.Errorf("%d functions declared, %d bodies", declared, len(m.funcs))
	}
	return m, nil
}

func (m *module) importSection(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		mod, err := r.name()
		if err != nil {
			return err
		}
		name, err := r.name()
		if err != nil {
			return err
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		switch kind {
		case 0: // function: type index
			if _, err := r.u32(); err != nil {
				return err
			}
			m.imports = append(m.imports, imported{mod, name})
		case 1: // table: reference type, limits
			if _, err := r.byte(); err != nil {
				return err
			}
			err = r.limits()
		case 2: // memory
			err = r.limits()
		case 3: // global: value type, mutability
			_, err = r.bytes(2)
		default:
			return fmt.Errorf("import kind 0x%02x: %w", kind, errUnknown)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (m *module) exportSection(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		name, err := r.name()
		if err != nil {
			return err
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		idx, err := r.u32()
		if err != nil {
			return err
		}
		if kind == 0 {
			m.exports[name] = idx
		}
	}
	return nil
}

func (m *module) codeSection(r *reader, visit func(int)) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		size, err := r.u32()
		if err != nil {
			return err
		}
		body, err := r.sub(size)
		if err != nil {
			return err
		}
		f, err := decodeBody(body, visit)
		if err != nil {
			return fmt.Errorf("function body %d: %w", i, err)
		}
		m.funcs = append(m.funcs, f)
	}
	return nil
}

// decodeBody reads one function body: its locals, then its instructions
// up to the final end, which must be the body's last byte.
func decodeBody(r *reader, visit func(int)) (function, error) {
	var f function
	groups, err := r.u32()
	if err != nil {
		return f, err
	}
	for i := uint32(0); i < groups; i++ {
		if _, err := r.u32(); err != nil {
			return f, err
		}
		if _, err := r.byte(); err != nil {
			return f, err
		}
	}
	depth := 1 // the function's own block
	for depth > 0 {
		if visit != nil {
			visit(r.off + r.pos)
		}
		op, err := r.byte()
		if err != nil {
			return f, err
		}
		f.instructions++
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
			if err := r.blockType(); err != nil {
				return f, err
			}
			f.loops = f.loops || op == 0x03
			depth++
		case op == 0x11: // call_indirect type table
			if _, err := r.u32(); err != nil {
				return f, err
			}
			if _, err := r.u32(); err != nil {
				return f, err
			}
			f.indirect = true
		case op == 0x0b: // end
			depth--
		case op == 0x10: // call
			c, err := r.u32()
			if err != nil {
				return f, err
			}
			f.calls = append(f.calls, c)
		default:
			heavy, err := r.immediates(op)
			if err != nil {
				return f, err
			}
			if heavy {
				f.heavy++
			}
		}
	}
	if r.pos != len(r.b) {
		return f, errors.New("instructions after the function's end")
	}
	return f, nil
}

// blockType reads a block type: empty, a value type, or a type index.
func (r *reader) blockType() error {
	if r.pos >= len(r.b) {
		return errEOF
	}
	switch r.b[r.pos] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.pos++
		return nil
	}
	v, err := r.sleb(33)
	if err != nil {
		return err
	}
	if v < 0 || v > math.MaxUint32 {
		return fmt.Errorf("block type %d: %w", v, errUnknown)
	}
	return nil
}

// immediates skips the immediates of an instruction other than the
// control instructions decodeBody handles, and says whether its cost grows
// with data (memory.grow, bulk memory and table operations). Opcodes are
// those of WebAssembly 2.0 without SIMD; any other is refused.
func (r *reader) immediates(op byte) (heavy bool, err error) {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0f || op == 0x1a || op == 0x1b:
		// unreachable, nop, else, return, drop, select
		return false, nil
	case op == 0x0c || op == 0x0d: // br, br_if
		_, err = r.u32()
	case op == 0x0e: // br_table
		var n uint32
		if n, err = r.u32(); err != nil {
			return false, err
		}
		for i := uint64(0); i <= uint64(n); i++ {
			if _, err = r.u32(); err != nil {
				return false, err
			}
		}
	case op == 0x1c: // select t*
		var n uint32
		if n, err = r.u32(); err != nil {
			return false, err
		}
		_, err = r.bytes(n)
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
		_, err = r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores: align, offset
		var align uint32
		if align, err = r.u32(); err != nil {
			return false, err
		}
		if align >= 64 { // a memory index (multi-memory)
			return false, fmt.Errorf("memory argument alignment %d: %w", align, errUnknown)
		}
		_, err = r.u32()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow: memory 0
		var mem byte
		if mem, err = r.byte(); err == nil && mem != 0 {
			err = fmt.Errorf("memory index %d: %w", mem, errUnknown)
		}
		heavy = op == 0x40
	case op == 0x41: // i32.const
		_, err = r.sleb(32)
	case op == 0x42: // i64.const
		_, err = r.sleb(64)
	case op == 0x43: // f32.const
		_, err = r.bytes(4)
	case op == 0x44: // f64.const
		_, err = r.bytes(8)
	case op >= 0x45 && op <= 0xc4: // numeric, sign extension
		return false, nil
	case op == 0xd0: // ref.null t
		_, err = r.byte()
	case op == 0xd1: // ref.is_null
		return false, nil
	case op == 0xd2: // ref.func
		_, err = r.u32()
	case op == 0xfc:
		return r.prefixed()
	default:
		return false, fmt.Errorf("opcode 0x%02x: %w", op, errUnknown)
	}
	return heavy, err
}

// prefixed skips a 0xfc instruction (saturating truncation, bulk memory,
// table instructions).
func (r *reader) prefixed() (heavy bool, err error) {
	sub, err := r.u32()
	if err != nil {
		return false, err
	}
	zero := func() error { // a reserved memory index byte
		c, err := r.byte()
		if err == nil && c != 0 {
			err = fmt.Errorf("memory index %d: %w", c, errUnknown)
		}
		return err
	}
	switch sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // trunc_sat
		return false, nil
	case 8: // memory.init data, memory
		if _, err = r.u32(); err != nil {
			return false, err
		}
		return true, zero()
	case 9: // data.drop
		_, err = r.u32()
		return false, err
	case 10: // memory.copy
		if err = zero(); err != nil {
			return false, err
		}
		return true, zero()
	case 11: // memory.fill
		return true, zero()
	case 12, 14: // table.init elem table, table.copy table table
		if _, err = r.u32(); err != nil {
			return false, err
		}
		_, err = r.u32()
		return true, err
	case 13: // elem.drop
		_, err = r.u32()
		return false, err
	case 15, 17: // table.grow, table.fill
		_, err = r.u32()
		return true, err
	case 16: // table.size
		_, err = r.u32()
		return false, err
	}
	return false, fmt.Errorf("opcode 0xfc %d: %w", sub, errUnknown)
}
