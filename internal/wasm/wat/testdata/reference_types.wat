;; Reference types: funcref and externref values, ref.* and table.*
;; instructions, element segments written as expressions.
(module
  (type $v2i (func (result i32)))
  (table $funcs 4 funcref)
  (table $externs 2 externref)
  (table $more funcref (elem (ref.func $seven) (item ref.func $eight)))
  (global $null_fn (mut funcref) (ref.null func))
  (global $fn funcref (ref.func $seven))
  (global $ext (mut externref) (ref.null extern))
  (elem (table $funcs) (i32.const 0) funcref (ref.func $seven) (ref.null func) (item ref.func $eight))
  (elem $passive funcref (ref.func $seven) (ref.func $eight))
  (elem $pexprs funcref (ref.null func) (item (ref.func $eight)))
  (elem declare func $nine)
  (elem $ext_seg externref (ref.null extern))
  (func $seven (type $v2i) (i32.const 7))
  (func $eight (type $v2i) (i32.const 8))
  (func $nine (type $v2i) (i32.const 9))

  (func (export "test_ref_is_null") (result i32)
    (local $f funcref) (local $e externref)
    (i32.add
      (i32.add (ref.is_null (local.get $f)) (ref.is_null (local.get $e)))
      (i32.add (ref.is_null (ref.func $nine)) (ref.is_null (global.get $null_fn)))))
  (func (export "test_table_ops") (result i32)
    (local $before i32)
    (local.set $before (table.size $funcs))
    (drop (table.grow $funcs (ref.func $nine) (i32.const 2)))
    (table.set $funcs (i32.const 1) (global.get $fn))
    (i32.add
      (i32.mul (local.get $before) (i32.const 1000))
      (i32.add
        (i32.mul (table.size $funcs) (i32.const 100))
        (i32.add (call_indirect $funcs (type $v2i) (i32.const 1))
                 (call_indirect $funcs (type $v2i) (i32.const 5))))))
  (func (export "test_table_fill_copy") (result i32)
    (table.fill $funcs (i32.const 0) (ref.func $nine) (i32.const 2))
    (table.copy $funcs $more (i32.const 2) (i32.const 0) (i32.const 2))
    (table.init $funcs $passive (i32.const 0) (i32.const 1) (i32.const 1))
    (elem.drop $passive)
    (i32.add
      (i32.add (call_indirect $funcs (type $v2i) (i32.const 0)) (call_indirect $funcs (type $v2i) (i32.const 1)))
      (i32.mul (i32.const 10) (call_indirect $funcs (type $v2i) (i32.const 3)))))
  (func (export "test_table_get") (result i32)
    (table.set $externs (i32.const 0) (ref.null extern))
    (i32.add (ref.is_null (table.get $externs (i32.const 0)))
             (ref.is_null (table.get $funcs (i32.const 0)))))
  (func (export "test_select_ref") (result i32)
    (ref.is_null (select (result funcref) (ref.null func) (ref.func $nine) (i32.const 0))))
  (func (export "test_default_table") (result i32)
    table.size 0
    i32.const 0
    table.get $funcs
    ref.is_null
    i32.add)
  (func $takes_ref (param externref) (result externref) (local.get 0))
  (func (export "test_ref_params") (result i32)
    (global.set $ext (call $takes_ref (global.get $ext)))
    (ref.is_null (global.get $ext)))
  (func (export "test_table_init_default") (result i32)
    (table.init $pexprs (i32.const 0) (i32.const 1) (i32.const 1))
    (call_indirect (type $v2i) (i32.const 0)))
)
