(module
  (func $classify (param i32) (result i32)
    block $default
      block $two
        block $one
          block $zero
            local.get 0
            br_table $zero $one $two $default
          end
          i32.const 100
          return
        end
        i32.const 101
        return
      end $two
      i32.const 102
      return
    end
    i32.const 199)
  (func $fact (param i64) (result i64)
    (local $acc i64)
    i64.const 1
    local.set $acc
    block $done
      loop $again
        local.get 0
        i64.eqz
        br_if $done
        local.get $acc
        local.get 0
        i64.mul
        local.set $acc
        local.get 0
        i64.const 1
        i64.sub
        local.set 0
        br $again
      end
    end
    local.get $acc)
  (func $abs (param i32) (result i32)
    local.get 0
    i32.const 0
    i32.lt_s
    if (result i32)
      i32.const 0
      local.get 0
      i32.sub
    else
      local.get 0
    end)
  (func $ifonly (param i32) (result i32)
    (local i32)
    local.get 0
    if $l
      i32.const 7
      local.set 1
    end $l
    local.get 0
    if
      nop
    else
      i32.const 9
      local.set 1
    end
    local.get 1)
  (func (export "test_br_table") (result i32)
    i32.const 0 call $classify
    i32.const 1 call $classify i32.add
    i32.const 2 call $classify i32.add
    i32.const 3 call $classify i32.add
    i32.const -1 call $classify i32.add)
  (func (export "test_fact") (result i64) i64.const 20 call $fact)
  (func (export "test_abs") (result i32) i32.const -5 call $abs i32.const 3 call $abs i32.add)
  (func (export "test_ifonly") (result i32) i32.const 1 call $ifonly i32.const 0 call $ifonly i32.const 10 i32.mul i32.add)
  (func (export "test_nested_br") (result i32)
    block (result i32)
      block (result i32)
        i32.const 5
        br 1
      end
      drop
      i32.const 6
    end)
  (func (export "test_br_if_value") (result i32)
    block $b (result i32)
      i32.const 11
      i32.const 1
      br_if $b
      drop
      i32.const 12
    end)
)
