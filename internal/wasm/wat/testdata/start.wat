(module
  (global $ready (mut i32) (i32.const 0))
  (func $init (global.set $ready (i32.const 123)))
  (start $init)
  (func (export "test_start") (result i32) (global.get $ready))
)
