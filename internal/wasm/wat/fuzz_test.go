package wat

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// FuzzCompile: no input makes Compile panic (or hit its internal-error
// guard), and whatever it accepts, wazero accepts too. Seeds: the corpus,
// testdata/fuzz/FuzzCompile, and some broken inputs.
//
//	go test -run '^$' -fuzz FuzzCompile -fuzztime 60s ./internal/wasm/wat/
func FuzzCompile(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.wat")
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, s := range []string{
		"", "(", ")", "(module", "(;", `"`, `(module (func (i32.const 0x)))`,
		`(module (func (result i32) (block (result i32) (br 0 (i32.const 1)))))`,
		`(module (func (if (then))))`, `(module (func block (param i32) end))`,
		`(module (memory 1) (data (i32.const 0) "\u{41}\00"))`,
	} {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, src []byte) {
		bin, err := Compile(src)
		if err != nil {
			if strings.Contains(err.Error(), internalError) {
				t.Fatalf("internal error on %q: %v", src, err)
			}
			return
		}
		cm, err := rt.CompileModule(ctx, bin)
		if err != nil {
			t.Fatalf("Compile accepted %q but wazero rejects the output: %v", src, err)
		}
		cm.Close(ctx)
	})
}
