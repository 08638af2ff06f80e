(module
  (memory (export "mem") (data "inline " "data" "\01\02"))
  (func (export "test_inline_data") (result i64) (i64.load (i32.const 3)))
  (func (export "test_inline_size") (result i32) (memory.size))
)
