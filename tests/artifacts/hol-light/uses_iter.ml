needs "Library/iter.ml";;

(* Uses ITER, which Library/iter.ml defines: loaded first by the line above. *)
let ITER_TWICE = prove
 (`!f x. ITER 2 f x = f (f x)`,
  REWRITE_TAC[ITER; TWO; ONE]);;
