;; A line comment before the module
(; a block comment (; with a nested one ;) still inside ;)
(module ;; trailing comment
  (; comment between fields ;)
  (func $f (; inline ;) (export "test_comments") (result i32) ;; comment
    (i32.add (; a ;) (i32.const 1) (;b;)(i32.const 2)) ;; 3
    ;; (i32.const 99) commented out
    (; (drop (i32.const 1)) ;)
  )
  ;;; three semicolons
  ;;
) ;; after the module
(; final block comment
   spanning lines ;)
