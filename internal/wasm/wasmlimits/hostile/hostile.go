// Package hostile builds binary WebAssembly modules that declare counts
// and sizes at their type's maximum in every section, truncated and
// overlapping sections, and deep nesting: inputs a runtime's decoder must
// refuse before it allocates by what they declare. Test support only: the
// tests of package wasmlimits and the gateway's upload and import tests
// (app/tests) send each of them.
package hostile

import "bytes"

// Module is one hostile input.
type Module struct {
	Name string
	Wasm []byte
}

// Max is the largest count a module can declare (a u32).
const Max = 1<<32 - 1

// Uleb is the unsigned LEB128 encoding of v.
func Uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// Section is a section of id with content, its size declared exactly.
func Section(id byte, content ...[]byte) []byte {
	c := bytes.Join(content, nil)
	return append(append([]byte{id}, Uleb(uint64(len(c)))...), c...)
}

// Name is a name: its length and bytes.
func Name(s string) []byte { return append(Uleb(uint64(len(s))), s...) }

// Header is the module header.
var Header = []byte("\x00asm\x01\x00\x00\x00")

// Module joins the header and sections.
func Join(sections ...[]byte) []byte {
	return append(append([]byte{}, Header...), bytes.Join(sections, nil)...)
}

var (
	// typeVoid is a type section of one type, () -> ().
	typeVoid = Section(1, Uleb(1), []byte{0x60, 0, 0})
	// oneFunc is a function section of one function of type 0.
	oneFunc = Section(3, Uleb(1), Uleb(0))
	// emptyBody is a code section of one body without locals.
	emptyBody = Section(10, Uleb(1), Uleb(2), []byte{0, 0x0b})
)

// body is a code section of one function body with the given locals
// groups and instructions (the final end added).
func body(groups [][2]uint64, instrs []byte) []byte {
	b := Uleb(uint64(len(groups)))
	for _, g := range groups {
		b = append(b, Uleb(g[0])...)
		b = append(b, byte(g[1]))
	}
	b = append(append(b, instrs...), 0x0b)
	return Section(10, Uleb(1), Uleb(uint64(len(b))), b)
}

// nameSection is a custom section "name" with one subsection.
func nameSection(sub byte, content ...[]byte) []byte {
	c := bytes.Join(content, nil)
	return Section(0, Name("name"), []byte{sub}, Uleb(uint64(len(c))), c)
}

// nested is n blocks nested in each other.
func nested(n int) []byte {
	b := bytes.Repeat([]byte{0x02, 0x40}, n)
	return append(b, bytes.Repeat([]byte{0x0b}, n)...)
}

// Corpus are the hostile modules, each named by what it declares.
func Corpus() []Module {
	const i32 = 0x7f
	valid := Join(typeVoid, oneFunc, emptyBody)
	m := []Module{
		{"locals 2^32-1", Join(typeVoid, oneFunc, body([][2]uint64{{Max, i32}}, nil))},
		{"locals 50000000", Join(typeVoid, oneFunc, body([][2]uint64{{50_000_000, i32}}, nil))},
		{"locals 2^31 twice", Join(typeVoid, oneFunc, body([][2]uint64{{1 << 31, i32}, {1 << 31, i32}}, nil))},
		{"locals 40000 in each of 100 functions", Join(typeVoid,
			Section(3, Uleb(100), bytes.Repeat(Uleb(0), 100)),
			Section(10, Uleb(100), bytes.Repeat([]byte{6, 1, 0xc0, 0xb8, 0x02, i32, 0x0b}, 100)))},
		{"local groups 2^32-1", Join(typeVoid, oneFunc, Section(10, Uleb(1), Uleb(6), Uleb(Max), []byte{0x0b}))},
		{"function names 2^32-1", Join(typeVoid, oneFunc, emptyBody, nameSection(1, Uleb(Max), Uleb(0), Name("f")))},
		{"local names 2^32-1", Join(typeVoid, oneFunc, emptyBody, nameSection(2, Uleb(1), Uleb(0), Uleb(Max), Uleb(0), Name("l")))},
		{"functions with local names 2^32-1", Join(typeVoid, oneFunc, emptyBody, nameSection(2, Uleb(Max), Uleb(0), Uleb(0)))},
		{"name subsection larger than its section", Join(typeVoid, oneFunc, emptyBody,
			Section(0, Name("name"), []byte{1}, Uleb(Max), Uleb(1)))},
		{"two name sections", Join(typeVoid, oneFunc, emptyBody, nameSection(0, Name("a")), nameSection(0, Name("b")))},
		{"types 2^32-1", Join(Section(1, Uleb(Max), []byte{0x60, 0, 0}))},
		{"parameters 2^32-1", Join(Section(1, Uleb(1), []byte{0x60}, Uleb(Max), []byte{i32, 0}))},
		{"results 2^32-1", Join(Section(1, Uleb(1), []byte{0x60, 0}, Uleb(Max), []byte{i32}))},
		{"imports 2^32-1", Join(typeVoid, Section(2, Uleb(Max), Name("env"), Name("f"), []byte{0}, Uleb(0)))},
		{"import name 2^32-1 bytes", Join(typeVoid, Section(2, Uleb(1), Name("env"), Uleb(Max), []byte("f\x00\x00")))},
		{"functions 2^32-1", Join(typeVoid, Section(3, Uleb(Max), Uleb(0)), emptyBody)},
		{"function bodies 2^32-1", Join(typeVoid, oneFunc, Section(10, Uleb(Max), Uleb(2), []byte{0, 0x0b}))},
		{"tables 2^32-1", Join(Section(4, Uleb(Max), []byte{0x70, 0}, Uleb(1)))},
		{"table of 2^32-1 elements", Join(Section(4, Uleb(1), []byte{0x70, 0}, Uleb(Max)))},
		{"table of at most 2^32-1 elements", Join(Section(4, Uleb(1), []byte{0x70, 1}, Uleb(0), Uleb(Max)))},
		{"imported table of 2^32-1 elements", Join(Section(2, Uleb(1), Name("env"), Name("t"), []byte{1, 0x70, 0}, Uleb(Max)))},
		{"memories 2^32-1", Join(Section(5, Uleb(Max), []byte{0}, Uleb(1)))},
		{"memory of 2^32-1 pages", Join(Section(5, Uleb(1), []byte{0}, Uleb(Max)))},
		{"memory of 65536 pages", Join(Section(5, Uleb(1), []byte{0}, Uleb(65536)))},
		{"globals 2^32-1", Join(Section(6, Uleb(Max), []byte{i32, 0, 0x41, 0, 0x0b}))},
		{"exports 2^32-1", Join(typeVoid, oneFunc, Section(7, Uleb(Max), Name("f"), []byte{0}, Uleb(0)), emptyBody)},
		{"element segments 2^32-1", Join(typeVoid, oneFunc,
			Section(4, Uleb(1), []byte{0x70, 0}, Uleb(1)),
			Section(9, Uleb(Max), Uleb(0), []byte{0x41, 0, 0x0b}, Uleb(1), Uleb(0)), emptyBody)},
		{"element segment of 2^32-1 functions", Join(typeVoid, oneFunc,
			Section(4, Uleb(1), []byte{0x70, 0}, Uleb(1)),
			Section(9, Uleb(1), Uleb(0), []byte{0x41, 0, 0x0b}, Uleb(Max), Uleb(0)), emptyBody)},
		{"element segment of 2^32-1 expressions", Join(typeVoid, oneFunc,
			Section(4, Uleb(1), []byte{0x70, 0}, Uleb(1)),
			Section(9, Uleb(1), Uleb(5), []byte{0x70}, Uleb(Max), []byte{0xd2, 0, 0x0b}), emptyBody)},
		{"data count 2^32-1", Join(Section(5, Uleb(1), []byte{0}, Uleb(1)), Section(12, Uleb(Max)))},
		{"data segments 2^32-1", Join(Section(5, Uleb(1), []byte{0}, Uleb(1)), Section(11, Uleb(Max), Uleb(1), Uleb(0)))},
		{"data segment of 2^32-1 bytes", Join(Section(5, Uleb(1), []byte{0}, Uleb(1)),
			Section(11, Uleb(1), Uleb(0), []byte{0x41, 0, 0x0b}, Uleb(Max), []byte("x")))},
		{"custom section of 2^32-1 bytes", append(append([]byte{}, valid...), append([]byte{0}, Uleb(Max)...)...)},
		{"custom name of 2^32-1 bytes", Join(Section(0, Uleb(Max), []byte("x")))},
		{"2000 custom sections", Join(bytes.Repeat(Section(0, Name("c")), 2000))},
		{"section size beyond the module", append(append([]byte{}, Header...), append([]byte{1}, Uleb(Max)...)...)},
		{"overlapping sections", Join(typeVoid, oneFunc, []byte{10, 8}, Uleb(1), Uleb(2), []byte{0, 0x0b}, typeVoid)},
		{"section repeated", Join(typeVoid, typeVoid)},
		{"sections out of order", Join(oneFunc, typeVoid, emptyBody)},
		{"function body beyond its section", Join(typeVoid, oneFunc, Section(10, Uleb(1), Uleb(Max), []byte{0, 0x0b}))},
		{"br_table of 2^32-1 labels", Join(typeVoid, oneFunc, body(nil, append([]byte{0x02, 0x40, 0x41, 0, 0x0e}, append(Uleb(Max), 0, 0, 0x0b)...)))},
		{"select of 2^32-1 types", Join(typeVoid, oneFunc, body(nil, append([]byte{0x1c}, Uleb(Max)...)))},
		{"1000000 nested blocks", Join(typeVoid, oneFunc, body(nil, nested(1_000_000)))},
		{"30000 nested loops", Join(typeVoid, oneFunc, body(nil, bytes.ReplaceAll(nested(30_000), []byte{0x02, 0x40}, []byte{0x03, 0x40})))},
		{"LEB128 of 6 bytes", Join(Section(1, []byte{0x81, 0x80, 0x80, 0x80, 0x80, 0x00}, []byte{0x60, 0, 0}))},
	}
	for _, n := range []int{9, 10, 12, 20, len(valid) - 1} {
		m = append(m, Module{Name: "truncated at byte " + itoa(n), Wasm: valid[:n]})
	}
	return m
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
