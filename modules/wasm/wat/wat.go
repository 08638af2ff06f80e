// Package wat assembles the WebAssembly text format (WAT) into the binary
// format, so that WASM plugin modules can be uploaded as text with nothing
// installed beyond the gateway binary.
//
// Scope: the WebAssembly 1.0 (MVP) text format, plus what toolchains emit
// for proxy-wasm modules:
//
//   - modules, written as (module $id? field*) or as a bare list of fields;
//   - types, imports, functions, tables, memories, globals, exports, start,
//     elem and data segments, with every inline abbreviation of the spec
//     (inline exports and imports, (table funcref (elem ...)),
//     (memory (data ...)));
//   - $names for types, functions, tables, memories, globals, locals,
//     labels and segments; numeric indices everywhere;
//   - every 1.0 instruction in flat and folded form, and from later
//     proposals: sign extension (i32.extend8_s ...), non-trapping
//     float-to-int conversions (i32.trunc_sat_f32_s ...), memory.copy and
//     memory.fill, memory.init and data.drop (with passive data segments
//     and the data count section), multi-value blocks and functions, typed
//     select;
//   - the instruction names used before the 2018 renaming (get_local,
//     i32.trunc_s/f32, ...);
//   - integer and float literals of every form (hex, underscores, hex
//     floats, inf, nan, nan:0x...), strings with all escapes, nested block
//     comments;
//   - passive and declarative segments listing functions.
//
// The output is validated like a WebAssembly engine would (types of every
// instruction, indices, constant initializers), so errors point at the
// line and column of the text rather than at a byte offset of the binary.
// With no name section, the output is byte for byte what wabt's wat2wasm
// produces by default.
//
// Not supported: reference-type instructions (ref.null, ref.func, table.get
// and the other table.* instructions), externref, element segments written
// as expressions, table.init, table.copy and elem.drop, SIMD, threads and atomics, multiple memories, 64-bit memories,
// exception handling, tail calls, GC, annotations (@...), quoted $"names",
// custom sections, the name section, and (module binary ...) and
// (module quote ...) from the spec's test scripts.
package wat

import "fmt"

const internalError = "internal error in the WAT assembler"

// Compile assembles a WebAssembly text-format module into the binary format.
// Errors carry line:column and say what was expected, so a module author can act on them.
func Compile(src []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				// A bug here must not take the gateway down; the fuzz
				// test fails on this message.
				out, err = nil, fmt.Errorf("%s: %v", internalError, r)
				return
			}
			out, err = nil, e
		}
	}()
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	return parseModule(toks).encode(), nil
}
