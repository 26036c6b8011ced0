;; The canonical ABI by hand: a record of two s32 is flattened to two i32 parameters; a
;; record result (two values, more than one flat result) goes through a return area whose
;; address the function returns.
(module
  (memory (export "memory") 1)
  (func (export "midpoint") (param $ax i32) (param $ay i32) (param $bx i32) (param $by i32) (result i32)
    (i32.store (i32.const 16) (i32.div_s (i32.add (local.get $ax) (local.get $bx)) (i32.const 2)))
    (i32.store (i32.const 20) (i32.div_s (i32.add (local.get $ay) (local.get $by)) (i32.const 2)))
    (i32.const 16))
  (func $abs (param $v i32) (result i32)
    (select (i32.sub (i32.const 0) (local.get $v)) (local.get $v) (i32.lt_s (local.get $v) (i32.const 0))))
  (func (export "distance") (param $ax i32) (param $ay i32) (param $bx i32) (param $by i32) (result i32)
    (i32.add
      (call $abs (i32.sub (local.get $ax) (local.get $bx)))
      (call $abs (i32.sub (local.get $ay) (local.get $by))))))
