(* A term that does not type-check: T is a boolean, not a number. *)
let BAD_TERM = prove
 (`1 + T = 2`,
  ARITH_TAC);;
