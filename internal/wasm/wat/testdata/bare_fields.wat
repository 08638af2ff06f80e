;; Module fields without the (module ...) wrapper.
(memory (export "memory") 1)
(func $double (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))
(func (export "test_bare") (result i32) (call $double (i32.const 21)))
