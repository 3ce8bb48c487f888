(* The claim is false: the decision procedure fails. *)
let WRONG = prove
 (`!n. n + 1 = n`,
  ARITH_TAC);;
