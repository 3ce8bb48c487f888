(* Theorems the image must prove: they need the natural-number and real arithmetic that hol.ml
   loads last, so they only go through when the whole of HOL Light loaded. *)
let selftest_nat = prove(`!n. n + 0 = n`, ARITH_TAC);;
let selftest_real = REAL_ARITH `&2 * &3 + &1 = &7`;;
