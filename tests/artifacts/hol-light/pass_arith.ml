(* Arithmetic by decision procedures and by rewriting. *)
let TWO_PLUS_TWO = ARITH_RULE `2 + 2 = 4`;;

let ADD_COMM_EXAMPLE = prove
 (`!m n. m + n = n + m`,
  REPEAT GEN_TAC THEN ARITH_TAC);;
