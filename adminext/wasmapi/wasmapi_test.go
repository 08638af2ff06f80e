package wasmapi

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/schema"
)

// TestBinaryLimits: the 16 MiB limit applies to the decoded module, and
// the errors name the field the module came from.
func TestBinaryLimits(t *testing.T) {
	field := func(err error) string {
		fe, ok := err.(*schema.FieldError)
		if !ok {
			t.Fatalf("not a field error: %v", err)
		}
		return fe.Field
	}
	s := func(v string) *string { return &v }

	exact := base64.StdEncoding.EncodeToString(make([]byte, MaxModuleBytes))
	if bin, f, err := Binary(&ModuleInput{WasmBase64: &exact}); err != nil || len(bin) != MaxModuleBytes || f != "wasm_base64" {
		t.Fatalf("exactly 16 MiB: %d %s %v", len(bin), f, err)
	}
	over := base64.StdEncoding.EncodeToString(make([]byte, MaxModuleBytes+1))
	if _, _, err := Binary(&ModuleInput{WasmBase64: &over}); err == nil || field(err) != "wasm_base64" || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("16 MiB + 1: %v", err)
	}
	if _, _, err := Binary(&ModuleInput{WasmBase64: s("AGFzbQ=")}); err == nil || field(err) != "wasm_base64" {
		t.Fatalf("bad padding: %v", err)
	}
	if _, _, err := Binary(&ModuleInput{WAT: s("(module (func $f (result i32) (i32.const 1) (bogus)))")}); err == nil || field(err) != "wat" {
		t.Fatalf("bad WAT: %v", err)
	}
	if _, _, err := Binary(&ModuleInput{WasmBase64: s(""), WAT: s("(module)")}); err != nil {
		t.Fatalf("empty wasm_base64 falls back to wat: %v", err)
	}
}
