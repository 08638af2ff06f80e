;; Passive data segments, memory.init and data.drop: wat2wasm then emits
;; the data count section.
(module
  (memory 1)
  (data $greeting "hello, world")
  (data (i32.const 64) "active")
  (data $bytes "\01\02\03\04")
  (func (export "test_memory_init") (result i64)
    (memory.init $greeting (i32.const 0) (i32.const 7) (i32.const 5)) ;; "world" at 0
    (memory.init 2 (i32.const 5) (i32.const 1) (i32.const 3))
    (data.drop $greeting)
    (i64.load (i32.const 0)))
  (func (export "test_data_drop_twice") (result i32)
    data.drop 2
    data.drop 2
    i32.const 0
    i32.const 0
    i32.const 0
    memory.init $bytes ;; zero-length init of a dropped segment is allowed
    i32.const 1)
)
