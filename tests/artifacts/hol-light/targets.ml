(* Theorems a target may name: one in other words, a weaker one, one under a hypothesis. *)
let ADD_COMM_EXAMPLE = prove (`!m n. m + n = n + m`, ARITH_TAC);;

let ADD_ONE_COMM = prove (`!n. n + 1 = 1 + n`, ARITH_TAC);;

let UNDER_HYPOTHESIS = ASSUME `1 = 2`;;

let EQ_SELF = prove (`!x:A. x = x`, REWRITE_TAC[]);;

let NOT_A_THEOREM = 42;;
