;; table_bomb: the glovebox `tool` world by hand. `call` asks for 50 million more funcref
;; table elements (400 MB of host memory for a few units of fuel) and fills them. The
;; store's cap must refuse the growth: then it answers the guest error "table.grow refused".
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (global $bump (mut i32) (i32.const 1024))
  (data (i32.const 64) "table.grow refused")
  (data (i32.const 96) "{\"grown\":true}")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $bump) (i32.const 7)) (i32.const -8)))
    (global.set $bump (i32.add (local.get $p) (local.get 3)))
    (local.get $p))
  (func (export "call") (param i32 i32) (result i32)
    (if (i32.eq (table.grow $t (ref.null func) (i32.const 50000000)) (i32.const -1))
      (then
        (i32.store8 (i32.const 0) (i32.const 1))
        (i32.store (i32.const 4) (i32.const 64))
        (i32.store (i32.const 8) (i32.const 18))
        (return (i32.const 0))))
    (table.fill $t (i32.const 0) (ref.null func) (i32.const 50000000))
    (i32.store8 (i32.const 0) (i32.const 0))
    (i32.store (i32.const 4) (i32.const 96))
    (i32.store (i32.const 8) (i32.const 14))
    (i32.const 0))
  (func (export "cabi_post_call") (param i32))
)
