;; A proxy-wasm (ABI 0.2.1) HTTP filter, the shape the gateway runs:
;; it logs each request, adds a request header, and answers 403 itself
;; when the request carries "x-deny".
(module $header_filter
  (type $i_i (func (param i32) (result i32)))
  (import "env" "proxy_log" (func $proxy_log (param i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value"
    (func $proxy_add_header_map_value (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_header_map_value"
    (func $proxy_get_header_map_value (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_send_local_response"
    (func $proxy_send_local_response (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_tick_period_milliseconds" (func $proxy_set_tick_period_milliseconds (param i32) (result i32)))

  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (global $requests (mut i64) (i64.const 0))

  ;; Strings at fixed offsets (offset, length) used below.
  (data (i32.const 16) "request seen")               ;; 16, 12
  (data (i32.const 32) "x-gateway-wasm")             ;; 32, 14
  (data (i32.const 48) "header-filter/1.0")          ;; 48, 17
  (data (i32.const 80) "x-deny")                     ;; 80, 6
  (data (i32.const 96) "denied by plugin")           ;; 96, 16
  (data (i32.const 128) "access denied\n")           ;; 128, 14
  (data (i32.const 160) "vm started\00")

  (func (export "proxy_abi_version_0_2_1"))

  ;; A bump allocator: the host asks for memory to copy values into.
  (func $malloc (export "proxy_on_memory_allocate") (type $i_i)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $p) (local.get 0)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq (memory.grow (i32.add (i32.shr_u (local.get 0) (i32.const 16)) (i32.const 1))) (i32.const -1))
          (then (unreachable)))))
    (local.get $p))

  (func (export "proxy_on_vm_start") (param $root i32) (param $config_size i32) (result i32)
    (drop (call $proxy_log (i32.const 2) (i32.const 160) (i32.const 10)))
    (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_context_create") (param $context_id i32) (param $parent_context_id i32))

  (func (export "proxy_on_request_headers") (param $context_id i32) (param $num_headers i32) (param $end_of_stream i32) (result i32)
    (local $value_ptr i32)
    (global.set $requests (i64.add (global.get $requests) (i64.const 1)))
    (drop (call $proxy_log (i32.const 2) (i32.const 16) (i32.const 12)))
    ;; x-deny present? (map type 0 = request headers; result 0 = OK)
    (if (i32.eqz (call $proxy_get_header_map_value (i32.const 0) (i32.const 80) (i32.const 6) (i32.const 200) (i32.const 204)))
      (then
        (drop (call $proxy_send_local_response
          (i32.const 403) (i32.const 96) (i32.const 16) (i32.const 128) (i32.const 14)
          (i32.const 0) (i32.const 0) (i32.const -1)))
        (return (i32.const 1)))) ;; Action::Pause
    (drop (call $proxy_add_header_map_value (i32.const 0) (i32.const 32) (i32.const 14) (i32.const 48) (i32.const 17)))
    (i32.const 0)) ;; Action::Continue

  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_delete") (param i32))
  (func (export "proxy_on_tick") (param i32)
    (drop (call $proxy_set_tick_period_milliseconds (i32.const 0))))
)
