(module
  (type $pair (func (result i32 i32)))
  (type $i2ii (func (param i32) (result i32 i32)))
  (func $swap (param i32 i32) (result i32 i32) (local.get 1) (local.get 0))
  (func $dup (type $i2ii) (local.get 0) (local.get 0))
  (func (export "test_multi_call") (result i32)
    (call $swap (i32.const 10) (i32.const 3))
    i32.sub)
  (func (export "test_multi_block") (result i32)
    (block (result i32 i32)
      (i32.const 7)
      (i32.const 8))
    i32.mul)
  (func (export "test_block_params") (result i32)
    i32.const 5
    block (param i32) (result i32)
      i32.const 6
      i32.add
    end
    i32.const 2
    loop $l (param i32) (result i32)
      i32.const 1
      i32.sub
    end
    i32.add)
  (func (export "test_block_type") (result i32)
    (block (type $pair) (i32.const 1) (i32.const 2))
    i32.add
    (block (type $i2ii) (param i32) (result i32 i32) (i32.const 3) i32.add (call $dup))
    i32.add)
  (func (export "test_if_multi") (result i32)
    (if (result i32 i64) (i32.const 1)
      (then (i32.const 1) (i64.const 2))
      (else (i32.const 3) (i64.const 4)))
    i32.wrap_i64
    i32.add)
)
