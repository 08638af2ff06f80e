package testgw

import "github.com/caddy-gateway/gateway/internal/wasm/proxywasm/pwtest"

// MinimalWAT is a minimal module the plugin runtime accepts: the ABI
// boilerplate of pwtest.Prelude (memory, version marker, allocator, context
// callback) and the VM, configure and request-header callbacks; every
// phase continues.
const MinimalWAT = `(module` + pwtest.Prelude + `  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) (i32.const 0)))
`
