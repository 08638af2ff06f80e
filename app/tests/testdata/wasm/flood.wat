;; Asks for a tick every millisecond and logs 16 messages of 16 KiB at
;; info level on every tick: what the gateway bounds (a minimum tick
;; period, the module's log budget, the length of one line).
(module
  (import "env" "proxy_log" (func $log (param i32 i32 i32) (result i32)))
  (import "env" "proxy_set_tick_period_milliseconds" (func $set_tick (param i32) (result i32)))
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 32768))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param $id i32) (param $parent i32)
    (global.set $heap (i32.const 32768)))
  (func (export "proxy_on_configure") (param $root i32) (param $size i32) (result i32)
    (memory.fill (i32.const 0) (i32.const 120) (i32.const 16384))
    (drop (call $set_tick (i32.const 1)))
    (i32.const 1))
  (func (export "proxy_on_tick") (param $root i32)
    (local $i i32)
    (loop $l
      (drop (call $log (i32.const 2) (i32.const 0) (i32.const 16384)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 16))))))
