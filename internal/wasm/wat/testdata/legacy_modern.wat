(module
  (global $g (mut i32) (i32.const 1))
  (memory 1)
  (func (export "test_legacy") (param i32) (result i32)
    (local i64)
    local.get 0
    local.set 0
    i32.const 5
    local.tee 0
    global.get $g
    i32.add
    global.set $g
    memory.size
    i32.const 0
    memory.grow
    i32.add
    i64.const 3
    i32.wrap_i64
    i32.add
    f32.const 2.5
    i32.trunc_f32_s
    i32.add
    f64.const 9.5
    i32.trunc_f64_u
    i32.add
    i32.const 7
    i64.extend_i32_u
    f64.convert_i64_s
    f32.demote_f64
    f64.promote_f32
    i64.reinterpret_f64
    f64.reinterpret_i64
    i32.trunc_sat_f64_s
    i32.add
    global.get $g
    i32.add)
)
