(module
  (func (export "test_labels") (result i32)
    (local $r i32)
    (block $outer
      (block $inner
        (loop $l
          (local.set $r (i32.add (local.get $r) (i32.const 1)))
          (br_if $l (i32.lt_u (local.get $r) (i32.const 5)))
          (br_if $inner (i32.eq (local.get $r) (i32.const 5)))
          (br $outer)))
      (local.set $r (i32.mul (local.get $r) (i32.const 10))))
    (local.get $r))
  (func (export "test_shadowed") (result i32)
    (block $x (result i32)
      (block $x (result i32)
        (br $x (i32.const 1)))
      (i32.const 10)
      i32.add))
  (func (export "test_depths") (result i32)
    block (result i32)
      block
        block
          i32.const 3
          br 2
        end
      end
      i32.const 4
    end)
)
