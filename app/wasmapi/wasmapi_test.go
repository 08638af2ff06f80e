package wasmapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm"
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
	if bin, f, err := Binary(&Module{WasmBase64: &exact}); err != nil || len(bin) != MaxModuleBytes || f != "wasm_base64" {
		t.Fatalf("exactly 16 MiB: %d %s %v", len(bin), f, err)
	}
	over := base64.StdEncoding.EncodeToString(make([]byte, MaxModuleBytes+1))
	if _, _, err := Binary(&Module{WasmBase64: &over}); err == nil || field(err) != "wasm_base64" || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("16 MiB + 1: %v", err)
	}
	if _, _, err := Binary(&Module{WasmBase64: s("AGFzbQ=")}); err == nil || field(err) != "wasm_base64" {
		t.Fatalf("bad padding: %v", err)
	}
	if _, _, err := Binary(&Module{WAT: s("(module (func $f (result i32) (i32.const 1) (bogus)))")}); err == nil || field(err) != "wat" {
		t.Fatalf("bad WAT: %v", err)
	}
	if _, _, err := Binary(&Module{WasmBase64: s(""), WAT: s("(module)")}); err != nil {
		t.Fatalf("empty wasm_base64 falls back to wat: %v", err)
	}
}

// TestCheckSlotGivesUp: a module check waits for the process's slot, and
// a request whose client left gives up waiting (499) instead of running
// the check; with the slot free the check runs.
func TestCheckSlotGivesUp(t *testing.T) {
	in := &Module{Name: "m", WAT: func(s string) *string { return &s }("(module)")}
	checkSlots <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := in.Row(ctx)
	<-checkSlots
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != 499 {
		t.Fatalf("waiting for a busy slot with the client gone: %v", err)
	}
	// the slot free: the check runs (and refuses a module without memory)
	if _, err := in.Row(context.Background()); err == nil || !strings.Contains(err.Error(), "wat: ") {
		t.Fatalf("the check with a free slot: %v", err)
	}
	if len(checkSlots) != 0 {
		t.Fatal("the check did not give its slot back")
	}
}

// TestModuleSchemaLimits: the schema's maxLength of wat is the enforced
// MaxWATBytes, and the fields' documentation states the compile limits
// the runtime enforces.
func TestModuleSchemaLimits(t *testing.T) {
	props := schema.JSONSchema(Module{}, schema.Input)["properties"].(map[string]any)
	if got := props["wat"].(map[string]any)["maxLength"]; fmt.Sprint(got) != strconv.Itoa(MaxWATBytes) {
		t.Fatalf("wat maxLength %v, want %d", got, MaxWATBytes)
	}
	doc := fmt.Sprint(props["wasm_base64"].(map[string]any)["description"])
	for _, n := range []int{proxywasm.MaxFunctionBranches, proxywasm.MaxCompileCost} {
		if !strings.Contains(doc, strconv.Itoa(n)) {
			t.Errorf("wasm_base64's description lacks the limit %d: %s", n, doc)
		}
	}
}
