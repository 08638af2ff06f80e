package wat

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/internal/wasm/internal/wasmtest"
)

// TestRoundTripToolchainBinaries takes real compiler output, the .wasm
// files wazero ships as test data in the module cache (TinyGo, Rust, Zig
// and Emscripten builds, and a sample of the WebAssembly spec tests),
// turns each into text with wasm2wat, and requires Compile to produce what
// wat2wasm produces from that text. Nothing is copied into this repository;
// without the module cache or wabt the test skips (fails on CI).
func TestRoundTripToolchainBinaries(t *testing.T) {
	bin := wat2wasmPath(t)
	w2w := filepath.Join(filepath.Dir(bin), "wasm2wat")
	// a spread-out sample of the spec tests keeps this quick
	dir, files := wasmtest.Binaries(t, 32, "v1")

	tmp := t.TempDir()
	same, unsupported, converted := 0, 0, 0
	for _, f := range files {
		name := strings.TrimPrefix(f, dir+"/")
		text := filepath.Join(tmp, filepath.Base(f)+".wat")
		if err := exec.Command(w2w, f, "-o", text).Run(); err != nil {
			continue // many spec test binaries are malformed on purpose
		}
		converted++
		src, err := os.ReadFile(text)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Compile(src)
		if err != nil {
			// Features this package leaves out (SIMD, reference types, ...).
			if e := err.Error(); strings.Contains(e, "unknown instruction") || strings.Contains(e, "expected value type") ||
				strings.Contains(e, "are not supported") || strings.Contains(e, "empty") {
				unsupported++
				t.Logf("%s: unsupported: %v", name, err)
				continue
			}
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := wat2wasm(t, bin, text)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: differs from wat2wasm:\n%s", name, diffHex(got, want))
			continue
		}
		same++
	}
	t.Logf("%d binaries, %d valid: %d round-trip byte for byte, %d use unsupported features", len(files), converted, same, unsupported)
	if same < converted*3/4 || same < 25 {
		t.Errorf("only %d of %d round-trip", same, converted)
	}
}
