package bound

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/caddy-gateway/gateway/internal/wasm/internal/wasmtest"
)

// TestDecoderMatchesObjdump decodes real compiler output and WebAssembly
// spec test binaries (the .wasm files wazero ships in the module cache:
// TinyGo, Rust, Zig, Emscripten builds, spec tests 1.0 and 2.0) and the
// gateway's fixtures, and requires the decoder to find exactly the
// instructions wabt's wasm-objdump finds, at the same offsets, in every
// module the gateway's runtime accepts; a module it cannot decode must be
// refused as unknown (a proposal beyond 2.0), never misread. A quarter of the spec test binaries
// (every other file) keep it quick. Without the module cache or
// wabt the test skips (fails on CI).
func TestDecoderMatchesObjdump(t *testing.T) {
	objdump := wasmtest.Tool(t, "wasm-objdump")
	_, files := wasmtest.Binaries(t, 4, "v1", "v2")
	fixtures, _ := filepath.Glob("../../../app/tests/testdata/wasm/*/*.wasm")
	files = append(files, fixtures...)
	sort.Strings(files)

	ctx := context.Background()
	// the gateway's features (WebAssembly 2.0); the interpreter validates
	// like the compiler, faster
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	decoded := map[string][]int{}
	var names []string
	unknown := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := rt.CompileModule(ctx, b); err != nil {
			continue // spec test binaries that are invalid on purpose
		} else {
			_ = c.Close(ctx)
		}
		var got []int
		m, err := decode(b)
		for d := 0; err == nil && d < len(m.funcs); d++ {
			err = m.walk(b, d, func(in instr) { got = append(got, in.off) })
		}
		if err != nil {
			if !errors.Is(err, errUnknown) {
				t.Errorf("%s: accepted by wazero, but: %v", f, err)
			}
			unknown[regexp.MustCompile(`opcode 0x[0-9a-f]+`).FindString(err.Error())]++
			continue
		}
		decoded[f] = got
		names = append(names, f)
	}
	compared, instructions, skipped := 0, 0, 0
	for i := 0; i < len(names); i += 200 {
		batch := names[i:min(i+200, len(names))]
		for _, f := range batch {
			want, ok := objdumpOffsets(objdump, batch, f)
			if !ok {
				skipped++
				continue
			}
			got := decoded[f]
			if !equal(got, want) {
				t.Errorf("%s: %d instructions decoded, wasm-objdump lists %d; first difference at %s", f, len(got), len(want), firstDiff(got, want))
				continue
			}
			compared++
			instructions += len(got)
		}
	}
	t.Logf("%d modules decoded like wasm-objdump (%d instructions); refused as unknown: %v; %d wasm-objdump cannot read", compared, instructions, unknown, skipped)
	if compared < 100 {
		t.Fatalf("only %d modules compared", compared)
	}
}

var objdumpLine = regexp.MustCompile(`^ ([0-9a-f]{6}): [0-9a-f ]+\| (.+)$`)

var objdumpCache = map[string][]int{}

// objdumpOffsets are the offsets of the instructions wasm-objdump -d lists
// in file (local declarations and continuation lines of long immediates
// left out), disassembling the whole batch at once; false when wasm-objdump
// cannot read the file (a few spec tests use encodings wazero accepts and
// wabt does not).
func objdumpOffsets(objdump string, batch []string, file string) ([]int, bool) {
	if offs, ok := objdumpCache[file]; ok {
		return offs, offs != nil
	}
	out, err := exec.Command(objdump, append([]string{"-d"}, batch...)...).Output()
	if err != nil {
		if len(batch) == 1 {
			objdumpCache[file] = nil
			return nil, false
		}
		return objdumpOffsets(objdump, []string{file}, file) // one file fails the batch
	}
	// files are listed in order, by base name
	var offs []int
	n := -1
	for _, line := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutSuffix(line, ":\tfile format wasm 0x1"); ok {
			if n >= 0 {
				objdumpCache[batch[n]] = offs
			}
			if n++; n >= len(batch) || filepath.Base(batch[n]) != name {
				panic("wasm-objdump listed " + name + " out of order")
			}
			offs = []int{}
			continue
		}
		m := objdumpLine.FindStringSubmatch(line)
		if m == nil || strings.TrimSpace(m[2]) == "" || strings.HasPrefix(m[2], "local[") {
			continue
		}
		off, _ := strconv.ParseInt(m[1], 16, 64)
		offs = append(offs, int(off))
	}
	if n >= 0 {
		objdumpCache[batch[n]] = offs
	}
	offs, ok := objdumpCache[file]
	return offs, ok && offs != nil
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func firstDiff(a, b []int) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return strconv.FormatInt(int64(a[i]), 16) + " vs " + strconv.FormatInt(int64(b[i]), 16)
		}
	}
	return "the end"
}
