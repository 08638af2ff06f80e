package wat

import "strings"

// valType is a value or reference type, as encoded in the binary format.
type valType byte

const (
	tI32       valType = 0x7F
	tI64       valType = 0x7E
	tF32       valType = 0x7D
	tF64       valType = 0x7C
	tFuncref   valType = 0x70
	tExternref valType = 0x6F
	tUnknown   valType = 0 // the validator's "any" (after unreachable code)
)

func (t valType) isRef() bool { return t == tFuncref || t == tExternref }

func (t valType) String() string {
	switch t {
	case tI32:
		return "i32"
	case tI64:
		return "i64"
	case tF32:
		return "f32"
	case tF64:
		return "f64"
	case tFuncref:
		return "funcref"
	case tExternref:
		return "externref"
	}
	return "unknown"
}

// immKind says which immediates an instruction takes in the text (and
// binary) format and, for the control and variable instructions, how the
// validator types it.
type immKind uint8

const (
	immNone         immKind = iota // fixed signature, no immediates
	immBlock                       // block, loop, if: label? blocktype
	immElse                        // else label?
	immEnd                         // end label?
	immBr                          // br, br_if: labelidx
	immBrTable                     // br_table labelidx+
	immReturn                      // return
	immUnreachable                 // unreachable
	immCall                        // call funcidx
	immCallIndirect                // call_indirect tableidx? typeuse
	immDrop                        // drop
	immSelect                      // select (result t)*
	immLocal                       // local.get/set/tee localidx
	immGlobal                      // global.get/set globalidx
	immMemArg                      // loads and stores: offset=? align=?
	immMemory                      // memory.size, memory.grow, memory.fill: a zero memory index
	immMemCopy                     // memory.copy: two zero memory indices
	immMemInit                     // memory.init dataidx
	immDataDrop                    // data.drop dataidx
	immRefNull                     // ref.null func|extern
	immRefIsNull                   // ref.is_null
	immRefFunc                     // ref.func funcidx
	immTable                       // table.get/set/size/grow/fill tableidx?
	immTableCopy                   // table.copy (tableidx tableidx)?
	immTableInit                   // table.init tableidx? elemidx
	immElemDrop                    // elem.drop elemidx
	immI32                         // i32.const
	immI64                         // i64.const
	immF32                         // f32.const
	immF64                         // f64.const
)

// opInfo describes one instruction.
type opInfo struct {
	name    string
	code    []byte // opcode, with the 0xFC prefix and LEB128 sub-opcode where there is one
	imm     immKind
	params  []valType // operand types popped (for fixed-signature instructions)
	results []valType // result types pushed
	align   uint32    // natural alignment of a load or store, as a power of two
	mem     bool      // needs a memory
}

// Block opcodes the parser and validator refer to.
const (
	opBlock = 0x02
	opLoop  = 0x03
	opIf    = 0x04
	opElse  = 0x05
	opEnd   = 0x0B
)

var opcodes = map[string]*opInfo{}

// sig parses a compact signature: "ii:i" is [i32 i32] -> [i32]; I, f and F
// are i64, f32 and f64.
func sig(s string) (params, results []valType) {
	conv := func(s string) []valType {
		var ts []valType
		for _, c := range s {
			ts = append(ts, map[rune]valType{'i': tI32, 'I': tI64, 'f': tF32, 'F': tF64}[c])
		}
		return ts
	}
	in, out, _ := strings.Cut(s, ":")
	return conv(in), conv(out)
}

func addOp(name string, code []byte, imm immKind, signature string) *opInfo {
	op := &opInfo{name: name, code: code, imm: imm}
	op.params, op.results = sig(signature)
	opcodes[name] = op
	return op
}

// addSeq adds instructions with consecutive one-byte opcodes sharing a signature.
func addSeq(prefix string, first byte, signature string, names ...string) {
	for i, n := range names {
		addOp(prefix+n, []byte{first + byte(i)}, immNone, signature)
	}
}

func init() {
	// Control and parametric instructions.
	addOp("unreachable", []byte{0x00}, immUnreachable, "")
	addOp("nop", []byte{0x01}, immNone, "")
	addOp("block", []byte{opBlock}, immBlock, "")
	addOp("loop", []byte{opLoop}, immBlock, "")
	addOp("if", []byte{opIf}, immBlock, "")
	addOp("else", []byte{opElse}, immElse, "")
	addOp("end", []byte{opEnd}, immEnd, "")
	addOp("br", []byte{0x0C}, immBr, "")
	addOp("br_if", []byte{0x0D}, immBr, "")
	addOp("br_table", []byte{0x0E}, immBrTable, "")
	addOp("return", []byte{0x0F}, immReturn, "")
	addOp("call", []byte{0x10}, immCall, "")
	addOp("call_indirect", []byte{0x11}, immCallIndirect, "")
	addOp("drop", []byte{0x1A}, immDrop, "")
	addOp("select", []byte{0x1B}, immSelect, "")

	// Variable instructions.
	addOp("local.get", []byte{0x20}, immLocal, "")
	addOp("local.set", []byte{0x21}, immLocal, "")
	addOp("local.tee", []byte{0x22}, immLocal, "")
	addOp("global.get", []byte{0x23}, immGlobal, "")
	addOp("global.set", []byte{0x24}, immGlobal, "")

	// Memory instructions: name, opcode, signature, natural alignment (log2).
	for _, m := range []struct {
		name  string
		code  byte
		sig   string
		align uint32
	}{
		{"i32.load", 0x28, "i:i", 2}, {"i64.load", 0x29, "i:I", 3},
		{"f32.load", 0x2A, "i:f", 2}, {"f64.load", 0x2B, "i:F", 3},
		{"i32.load8_s", 0x2C, "i:i", 0}, {"i32.load8_u", 0x2D, "i:i", 0},
		{"i32.load16_s", 0x2E, "i:i", 1}, {"i32.load16_u", 0x2F, "i:i", 1},
		{"i64.load8_s", 0x30, "i:I", 0}, {"i64.load8_u", 0x31, "i:I", 0},
		{"i64.load16_s", 0x32, "i:I", 1}, {"i64.load16_u", 0x33, "i:I", 1},
		{"i64.load32_s", 0x34, "i:I", 2}, {"i64.load32_u", 0x35, "i:I", 2},
		{"i32.store", 0x36, "ii:", 2}, {"i64.store", 0x37, "iI:", 3},
		{"f32.store", 0x38, "if:", 2}, {"f64.store", 0x39, "iF:", 3},
		{"i32.store8", 0x3A, "ii:", 0}, {"i32.store16", 0x3B, "ii:", 1},
		{"i64.store8", 0x3C, "iI:", 0}, {"i64.store16", 0x3D, "iI:", 1},
		{"i64.store32", 0x3E, "iI:", 2},
	} {
		op := addOp(m.name, []byte{m.code}, immMemArg, m.sig)
		op.align, op.mem = m.align, true
	}
	addOp("memory.size", []byte{0x3F}, immMemory, ":i").mem = true
	addOp("memory.grow", []byte{0x40}, immMemory, "i:i").mem = true
	addOp("memory.copy", []byte{0xFC, 10}, immMemCopy, "iii:").mem = true
	addOp("memory.fill", []byte{0xFC, 11}, immMemory, "iii:").mem = true
	addOp("memory.init", []byte{0xFC, 8}, immMemInit, "iii:").mem = true
	addOp("data.drop", []byte{0xFC, 9}, immDataDrop, "")

	// Reference types and table instructions; the table's element type
	// completes their signatures.
	addOp("ref.null", []byte{0xD0}, immRefNull, "")
	addOp("ref.is_null", []byte{0xD1}, immRefIsNull, "")
	addOp("ref.func", []byte{0xD2}, immRefFunc, "")
	addOp("table.get", []byte{0x25}, immTable, "i:")
	addOp("table.set", []byte{0x26}, immTable, "i:")
	addOp("table.init", []byte{0xFC, 12}, immTableInit, "iii:")
	addOp("elem.drop", []byte{0xFC, 13}, immElemDrop, "")
	addOp("table.copy", []byte{0xFC, 14}, immTableCopy, "iii:")
	addOp("table.grow", []byte{0xFC, 15}, immTable, ":i")
	addOp("table.size", []byte{0xFC, 16}, immTable, ":i")
	addOp("table.fill", []byte{0xFC, 17}, immTable, "")

	// Numeric instructions.
	addOp("i32.const", []byte{0x41}, immI32, ":i")
	addOp("i64.const", []byte{0x42}, immI64, ":I")
	addOp("f32.const", []byte{0x43}, immF32, ":f")
	addOp("f64.const", []byte{0x44}, immF64, ":F")

	addSeq("i32.", 0x45, "i:i", "eqz")
	addSeq("i32.", 0x46, "ii:i", "eq", "ne", "lt_s", "lt_u", "gt_s", "gt_u", "le_s", "le_u", "ge_s", "ge_u")
	addSeq("i64.", 0x50, "I:i", "eqz")
	addSeq("i64.", 0x51, "II:i", "eq", "ne", "lt_s", "lt_u", "gt_s", "gt_u", "le_s", "le_u", "ge_s", "ge_u")
	addSeq("f32.", 0x5B, "ff:i", "eq", "ne", "lt", "gt", "le", "ge")
	addSeq("f64.", 0x61, "FF:i", "eq", "ne", "lt", "gt", "le", "ge")

	intBin := []string{"add", "sub", "mul", "div_s", "div_u", "rem_s", "rem_u", "and", "or", "xor", "shl", "shr_s", "shr_u", "rotl", "rotr"}
	addSeq("i32.", 0x67, "i:i", "clz", "ctz", "popcnt")
	addSeq("i32.", 0x6A, "ii:i", intBin...)
	addSeq("i64.", 0x79, "I:I", "clz", "ctz", "popcnt")
	addSeq("i64.", 0x7C, "II:I", intBin...)

	floatUn := []string{"abs", "neg", "ceil", "floor", "trunc", "nearest", "sqrt"}
	floatBin := []string{"add", "sub", "mul", "div", "min", "max", "copysign"}
	addSeq("f32.", 0x8B, "f:f", floatUn...)
	addSeq("f32.", 0x92, "ff:f", floatBin...)
	addSeq("f64.", 0x99, "F:F", floatUn...)
	addSeq("f64.", 0xA0, "FF:F", floatBin...)

	// Conversions, 0xA7 to 0xBF in order.
	for i, c := range []struct{ name, sig string }{
		{"i32.wrap_i64", "I:i"},
		{"i32.trunc_f32_s", "f:i"}, {"i32.trunc_f32_u", "f:i"}, {"i32.trunc_f64_s", "F:i"}, {"i32.trunc_f64_u", "F:i"},
		{"i64.extend_i32_s", "i:I"}, {"i64.extend_i32_u", "i:I"},
		{"i64.trunc_f32_s", "f:I"}, {"i64.trunc_f32_u", "f:I"}, {"i64.trunc_f64_s", "F:I"}, {"i64.trunc_f64_u", "F:I"},
		{"f32.convert_i32_s", "i:f"}, {"f32.convert_i32_u", "i:f"}, {"f32.convert_i64_s", "I:f"}, {"f32.convert_i64_u", "I:f"},
		{"f32.demote_f64", "F:f"},
		{"f64.convert_i32_s", "i:F"}, {"f64.convert_i32_u", "i:F"}, {"f64.convert_i64_s", "I:F"}, {"f64.convert_i64_u", "I:F"},
		{"f64.promote_f32", "f:F"},
		{"i32.reinterpret_f32", "f:i"}, {"i64.reinterpret_f64", "F:I"},
		{"f32.reinterpret_i32", "i:f"}, {"f64.reinterpret_i64", "I:F"},
	} {
		addOp(c.name, []byte{0xA7 + byte(i)}, immNone, c.sig)
	}

	// Sign extension (0xC0..0xC4).
	addSeq("i32.", 0xC0, "i:i", "extend8_s", "extend16_s")
	addSeq("i64.", 0xC2, "I:I", "extend8_s", "extend16_s", "extend32_s")

	// Non-trapping float-to-int conversions (0xFC 0..7).
	for i, c := range []struct{ name, sig string }{
		{"i32.trunc_sat_f32_s", "f:i"}, {"i32.trunc_sat_f32_u", "f:i"},
		{"i32.trunc_sat_f64_s", "F:i"}, {"i32.trunc_sat_f64_u", "F:i"},
		{"i64.trunc_sat_f32_s", "f:I"}, {"i64.trunc_sat_f32_u", "f:I"},
		{"i64.trunc_sat_f64_s", "F:I"}, {"i64.trunc_sat_f64_u", "F:I"},
	} {
		addOp(c.name, []byte{0xFC, byte(i)}, immNone, c.sig)
	}

	// Names used before the 2018 renaming, still found in older modules.
	legacy := map[string]string{
		"get_local": "local.get", "set_local": "local.set", "tee_local": "local.tee",
		"get_global": "global.get", "set_global": "global.set",
		"current_memory": "memory.size", "grow_memory": "memory.grow",
	}
	for name := range opcodes {
		// i32.trunc_f32_s was i32.trunc_s/f32, i32.trunc_sat_f32_s was
		// i32.trunc_s:sat/f32, i32.wrap_i64 was i32.wrap/i64.
		if !strings.Contains(name, ".") {
			continue
		}
		sign := ""
		base := name
		if strings.HasSuffix(name, "_s") || strings.HasSuffix(name, "_u") {
			sign, base = name[len(name)-2:], name[:len(name)-2]
		}
		i := strings.LastIndexByte(base, '_')
		if i < 0 {
			continue
		}
		src := base[i+1:]
		if src != "i32" && src != "i64" && src != "f32" && src != "f64" {
			continue
		}
		base = base[:i]
		if b, ok := strings.CutSuffix(base, "_sat"); ok {
			legacy[b+sign+":sat/"+src] = name
		} else {
			legacy[base+sign+"/"+src] = name
		}
	}
	for old, name := range legacy {
		opcodes[old] = opcodes[name]
	}
}
