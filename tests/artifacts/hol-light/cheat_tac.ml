(* A statement whose proof is left for later. *)
let HARD = prove
 (`!n. n EXP 2 + 1 > n`,
  CHEAT_TAC);;

let EASY = ARITH_RULE `1 + 1 = 2`;;
