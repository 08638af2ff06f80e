;; Asks for 125 MiB more memory in the request phase. Under the host's
;; per-instance cap (64 MiB) the growth is refused and the module aborts,
;; as a language runtime does when an allocation fails; without a cap it
;; would get the memory and let the request through.
(module
  (memory (export "memory") 1)
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (i32.eq (memory.grow (i32.const 2000)) (i32.const -1))
      (then (unreachable)))
    (i32.const 0)))
