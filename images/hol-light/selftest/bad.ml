(* A false goal the image must refuse. *)
let selftest_false = prove(`2 + 2 = 5`, ARITH_TAC);;
