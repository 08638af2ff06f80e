(module
  (func $never (result i32)
    unreachable
    i32.add)
  (func $after_br (result i64)
    (block $b (result i64)
      (br $b (i64.const 3))
      drop
      select
      drop
      i32.const 1
      br_table 0 0)
  )
  (func $after_return (param i32) (result i32)
    (return (local.get 0))
    (i64.const 1)
    i64.eqz
    drop)
  (func (export "test_unreachable_paths") (result i64)
    (i64.add (call $after_br) (i64.extend_i32_u (call $after_return (i32.const 4)))))
)
