;; The proxy-wasm filter of the throughput benchmark: adds the response
;; header x-wasm: 1, nothing else (bench/proxy.sh uploads it as WAT).
(module
  (import "env" "proxy_add_header_map_value" (func $add (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "x-wasm")
  (data (i32.const 32) "1")
  (global $heap (mut i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  ;; a bump allocator that starts over at 1 KiB (the host asks only for
  ;; the plugin configuration, which is empty here)
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (if (i32.gt_u (i32.add (global.get $heap) (local.get $n)) (i32.const 60000))
      (then (global.set $heap (i32.const 1024))))
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  ;; map type 2: response headers
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (drop (call $add (i32.const 2) (i32.const 16) (i32.const 6) (i32.const 32) (i32.const 1)))
    (i32.const 0)))
