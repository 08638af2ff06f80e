;; Explicit types, type uses, and implicit types appended in text order.
(module $types
  (type $none (func))
  (type $i2i (func (param i32) (result i32)))
  (type (func (param $named i64) (param f32 f64) (result i64)))
  (type $dup (func (param i32) (result i32))) ;; same signature, a second index

  (func $a (type $i2i) local.get 0)
  (func $b (type $i2i) (param i32) (result i32) local.get 0)
  (func $c (param i32) (result i32) local.get 0) ;; reuses $i2i
  (func $d (type $dup) (param $x i32) (result i32) local.get $x)
  (func $e (param f64) (result f64 f64) local.get 0 local.get 0) ;; new implicit type
  (func $f (type 2) local.get 0)
  (func $g)
  (func $h (result i32) (i32.const 7))
  (func $i (param i64 i64) (result i64) (i64.add (local.get 0) (local.get 1))) ;; another implicit
  (func (export "test_types") (result i32)
    (i32.add (call $a (i32.const 1)) (call $b (i32.const 2)))
    (i32.add (call $c (i32.const 3)))
    (i32.add (call $d (i32.const 4)))
    (i32.add (call $h)))
)
