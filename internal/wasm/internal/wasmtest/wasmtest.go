// Package wasmtest finds what the wasm packages' differential tests compare
// against: wabt's tools and the WebAssembly binaries wazero ships as test
// data in the module cache (real compiler output and spec test binaries;
// read in place, never copied into this repository). Test support only:
// the differential tests of internal/wasm/wat and internal/wasm/bound use it.
package wasmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Tool returns the path of one of wabt's programs (wat2wasm, wasm2wat,
// wasm-objdump). Without it the test skips, and fails on CI (make test-deps
// installs wabt).
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (Debian package wabt) is required on CI: %v", name, err)
		}
		t.Skipf("%s not installed (make test-deps installs wabt)", name)
	}
	return p
}

// Binaries returns wazero's directory in the module cache and the .wasm
// files it ships: TinyGo, Rust, Zig and Emscripten builds, then every
// specEvery-th binary of the spec tests of the given versions ("v1", "v2").
// Without the module cache the test skips.
func Binaries(t testing.TB, specEvery int, specVersions ...string) (string, []string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("wazero's module directory not found: %v", err)
	}
	var files []string
	for _, pattern := range []string{
		"examples/*/testdata/*.wasm", "examples/*/*/testdata/*.wasm",
		"imports/*/testdata/*.wasm", "imports/*/testdata/*/*.wasm", "imports/*/example/testdata/*/*.wasm",
		"cmd/wazero/testdata/*/*.wasm",
	} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		files = append(files, m...)
	}
	for _, v := range specVersions {
		spec, _ := filepath.Glob(filepath.Join(dir, "internal/integration_test/spectest", v, "testdata/*.wasm"))
		sort.Strings(spec)
		for i := 0; i < len(spec); i += specEvery {
			files = append(files, spec[i])
		}
	}
	if len(files) < 50 {
		t.Skipf("only %d .wasm files found under %s", len(files), dir)
	}
	return dir, files
}
