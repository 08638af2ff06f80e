(module
  (func (export "test_i32_literals") (result i32)
    i32.const 0
    i32.const 1_000_000 i32.add
    i32.const 0xFF_FF i32.add
    i32.const -2147483648 i32.add
    i32.const 4294967295 i32.add
    i32.const +17 i32.add
    i32.const -0x80000000 i32.add
    i32.const 0xffffffff i32.add
    i32.const -1 i32.add
    i32.const 2147483647 i32.add
    i32.const 0x7fff_ffff i32.add
    i32.const 63 i32.add
    i32.const 64 i32.add
    i32.const -64 i32.add
    i32.const -65 i32.add
    i32.const 8191 i32.add
    i32.const 8192 i32.add)
  (func (export "test_i64_literals") (result i64)
    i64.const 0
    i64.const 18446744073709551615 i64.add
    i64.const -9223372036854775808 i64.add
    i64.const 9223372036854775807 i64.add
    i64.const 0xffff_ffff_ffff_ffff i64.add
    i64.const -0x8000000000000000 i64.add
    i64.const 1_234_567_890_123 i64.add
    i64.const +0x10 i64.add
    i64.const 4294967296 i64.add
    i64.const -4294967297 i64.add)
  (func (export "test_offsets") (result i32)
    (i32.load offset=0x10 (i32.const 0))
    (i32.load offset=1_000 (i32.const 0))
    i32.add)
  (memory 1)
)
