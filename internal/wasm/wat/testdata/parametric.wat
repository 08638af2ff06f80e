(module
  (func (export "test_select") (result i32)
    (select (i32.const 10) (i32.const 20) (i32.const 0)))
  (func (export "test_select_i64") (result i64)
    (select (i64.const 10) (i64.const 20) (i32.const 1)))
  (func (export "test_select_typed") (result i32)
    i32.const 1
    i32.const 2
    i32.const 0
    select (result i32))
  (func (export "test_select_f64") (result i64)
    (i64.trunc_f64_s (select (result f64) (f64.const 1.5) (f64.const 2.5) (i32.const 1))))
  (func (export "test_drop") (result i32)
    (drop (i64.const 1))
    (drop (f32.const 2))
    i32.const 3
    i32.const 4
    drop)
  (func (export "test_nop") (result i32)
    nop (nop) (i32.const 5) nop)
)
