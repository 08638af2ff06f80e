(module
  (memory 1)
  (data (i32.const 0) "abcdefgh")
  (func (export "test_copy") (result i64)
    (memory.copy (i32.const 2) (i32.const 0) (i32.const 6)) ;; overlapping
    (i64.load (i32.const 0)))
  (func (export "test_fill") (result i64)
    (memory.fill (i32.const 16) (i32.const 0x41) (i32.const 5))
    i32.const 20
    i32.const 0x42
    i32.const 2
    memory.fill
    (i64.load (i32.const 16)))
)
