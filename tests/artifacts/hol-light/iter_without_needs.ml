(* Uses Library/iter.ml without loading it: fails alone, so it must fail on a preloaded parent. *)
let ITER_TWICE = prove
 (`!f x. ITER 2 f x = f (f x)`,
  REWRITE_TAC[ITER; TWO; ONE]);;
