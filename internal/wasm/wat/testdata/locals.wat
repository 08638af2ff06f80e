(module
  (func $sum (export "sum") (param $a i32) (param $b i64) (param f32 f64) (result f64)
    (local $x i32) (local i64 i64) (local $y f32) (local f64 f64 i32 i32 i32)
    (local.set $x (local.get $a))
    (local.set 5 (local.get $b))
    (local.set $y (local.get 2))
    (local.set 8 (local.get 3))
    (local.set 10 (i32.const 3))
    (local.tee 11 (i32.const 4))
    drop
    (f64.add
      (f64.add (f64.convert_i32_s (local.get $x)) (f64.convert_i64_s (local.get 5)))
      (f64.add (f64.promote_f32 (local.get $y)) (local.get 8))))
  (func (export "test_locals") (result i64)
    (i64.trunc_f64_s (call $sum (i32.const 1) (i64.const 2) (f32.const 3) (f64.const 4))))
  (func (export "test_local_defaults") (result i32)
    (local i32 i64)
    (i32.add (local.get 0) (i32.wrap_i64 (local.get 1))))
)
