(module
  (type $bin (func (param i32 i32) (result i32)))
  (table $ops 4 funcref)
  (elem (i32.const 0) $add $sub $mul)
  (elem (i32.const 3) func $neg)
  (func $add (type $bin) (i32.add (local.get 0) (local.get 1)))
  (func $sub (type $bin) (i32.sub (local.get 0) (local.get 1)))
  (func $mul (param i32 i32) (result i32) (i32.mul (local.get 0) (local.get 1)))
  (func $neg (param i32) (result i32) (i32.sub (i32.const 0) (local.get 0)))
  (func $apply (param $op i32) (param $a i32) (param $b i32) (result i32)
    (call_indirect (type $bin) (local.get $a) (local.get $b) (local.get $op)))
  (func (export "test_indirect") (result i32)
    (i32.add
      (i32.add (call $apply (i32.const 0) (i32.const 7) (i32.const 5))
               (call $apply (i32.const 1) (i32.const 7) (i32.const 5)))
      (call $apply (i32.const 2) (i32.const 7) (i32.const 5))))
  (func (export "test_indirect_inline") (result i32)
    (call_indirect (param i32) (result i32) (i32.const 9) (i32.const 3)))
  (func (export "test_indirect_flat") (result i32)
    i32.const 2
    i32.const 8
    i32.const 1
    call_indirect $ops (type $bin))
  (func (export "test_indirect_table0") (result i32)
    i32.const 6
    i32.const 6
    i32.const 2
    call_indirect 0 (type 0))
)
