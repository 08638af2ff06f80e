(module
  (memory $mem 1 4)
  (func (export "test_loads") (result i64)
    (i64.store (i32.const 0) (i64.const 0x8877665544332211))
    (i64.add
      (i64.add
        (i64.extend_i32_u (i32.load (i32.const 0)))
        (i64.extend_i32_u (i32.load8_s (i32.const 7))))
      (i64.add
        (i64.load offset=0 align=8 (i32.const 0))
        (i64.add
          (i64.extend_i32_s (i32.load16_s offset=2 (i32.const 4)))
          (i64.add (i64.load8_u (i32.const 1)) (i64.load8_s align=1 (i32.const 7)))))))
  (func (export "test_loads2") (result i64)
    (i64.store32 (i32.const 16) (i64.const -1))
    (i64.store16 offset=8 (i32.const 16) (i64.const 0x1234))
    (i64.store8 offset=10 align=1 (i32.const 16) (i64.const 0xAB))
    (i32.store8 (i32.const 32) (i32.const 0x1FF))
    (i32.store16 align=2 (i32.const 34) (i32.const 0xFFFF))
    (i64.add
      (i64.add (i64.load16_u (i32.const 24)) (i64.load16_s (i32.const 34)))
      (i64.add
        (i64.add (i64.load32_s (i32.const 16)) (i64.load32_u (i32.const 16)))
        (i64.extend_i32_u (i32.add (i32.load8_u (i32.const 32)) (i32.load16_u offset=0x2 (i32.const 32)))))))
  (func (export "test_floats_mem") (result i32)
    (f32.store offset=100 (i32.const 0) (f32.const 2.5))
    (f64.store offset=104 align=4 (i32.const 0) (f64.const 4.25))
    (i32.trunc_f64_s
      (f64.add (f64.promote_f32 (f32.load offset=100 (i32.const 0)))
               (f64.load offset=104 (i32.const 0)))))
  (func (export "test_size_grow") (result i32)
    (local $before i32)
    (local.set $before (memory.size))
    (drop (memory.grow (i32.const 1)))
    (i32.add (i32.mul (local.get $before) (i32.const 100))
             (i32.add (memory.size) (memory.grow (i32.const 10)))))
  (func (export "test_flat_memarg") (result i32)
    i32.const 200
    i32.const 77
    i32.store offset=4 align=4
    i32.const 204
    i32.load align=2)
)
