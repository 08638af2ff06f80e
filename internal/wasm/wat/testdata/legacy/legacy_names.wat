(module
  (global $g (mut i32) (i32.const 1))
  (memory 1)
  (func (export "test_legacy") (param i32) (result i32)
    (local i64)
    get_local 0
    set_local 0
    i32.const 5
    tee_local 0
    get_global $g
    i32.add
    set_global $g
    current_memory
    i32.const 0
    grow_memory
    i32.add
    i64.const 3
    i32.wrap/i64
    i32.add
    f32.const 2.5
    i32.trunc_s/f32
    i32.add
    f64.const 9.5
    i32.trunc_u/f64
    i32.add
    i32.const 7
    i64.extend_u/i32
    f64.convert_s/i64
    f32.demote/f64
    f64.promote/f32
    i64.reinterpret/f64
    f64.reinterpret/i64
    i32.trunc_s:sat/f64
    i32.add
    get_global $g
    i32.add)
)
