// Package wat assembles the WebAssembly text format (WAT) into the binary
// format, so that WASM plugin modules can be uploaded as text with nothing
// installed beyond the gateway binary.
//
// Scope: the WebAssembly 1.0 (MVP) text format, plus the post-MVP features
// toolchains emit (all enabled by default in wazero and wat2wasm):
//
//   - modules, written as (module $id? field*) or as a bare list of fields;
//   - types, imports, functions, tables, memories, globals, exports, start,
//     elem and data segments, with every inline abbreviation of the spec
//     (inline exports and imports, (table funcref (elem ...)),
//     (memory (data ...))); active, passive and declarative segments;
//   - $names for types, functions, tables, memories, globals, locals,
//     labels and segments; numeric indices everywhere;
//   - every 1.0 instruction in flat and folded form;
//   - sign extension (i32.extend8_s ...), non-trapping float-to-int
//     conversions (i32.trunc_sat_f32_s ...), multi-value blocks and
//     functions;
//   - bulk memory: memory.copy, memory.fill, memory.init, data.drop (with
//     the data count section when code uses them);
//   - reference types: funcref and externref values, ref.null, ref.is_null,
//     ref.func, typed select, table.get/set/size/grow/fill/copy/init,
//     elem.drop, several tables, element segments written as expressions;
//   - the instruction names used before the 2018 renaming (get_local,
//     i32.trunc_s/f32, ...) and anyfunc;
//   - integer and float literals of every form (hex, underscores, hex
//     floats, inf, nan, nan:0x...), strings with all escapes, nested block
//     comments; a leading byte order mark is ignored.
//
// The output is validated like a WebAssembly engine would (types of every
// instruction, indices, constant initializers), so errors point at the
// line and column of the text rather than at a byte offset of the binary.
// Without a name section, the output is byte for byte what wabt's wat2wasm
// (1.0.32) produces by default, except where wat2wasm is wrong: hex float
// literals with more digits than the type holds are rounded to nearest
// (wat2wasm truncates), and a few invalid modules it accepts are refused.
//
// Not supported: SIMD (v128), threads and atomics (shared memories),
// multiple memories, 64-bit memories, exception handling, tail calls, GC
// and typed function references, extended constant expressions, custom
// sections and the name section, annotations (@...), quoted $"names", and
// the spec test-script forms (module binary ...) and (module quote ...).
// An import from an empty module name is refused (no engine can provide it
// under wazero).
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
