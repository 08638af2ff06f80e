;; Answers every request locally: 418, body "denied by wat", header
;; x-denied: yes. The upstream is never called.
(module
  (import "env" "proxy_send_local_response" (func $local (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "denied by wat")
  (data (i32.const 96) "wat_denied")
  ;; one header, serialized as a header map: count, sizes, NUL-terminated
  ;; name and value
  (data (i32.const 128) "\01\00\00\00\08\00\00\00\03\00\00\00x-denied\00yes\00")
  (global $heap (mut i32) (i32.const 4096))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param $id i32) (param $parent i32)
    (global.set $heap (i32.const 4096)))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (drop (call $local (i32.const 418) (i32.const 96) (i32.const 10) (i32.const 64) (i32.const 13) (i32.const 128) (i32.const 25) (i32.const -1)))
    (i32.const 1)))
