let FIRST_FACT = ARITH_RULE `1 + 1 = 2`;;

let SECOND_FACT = prove
 (`!x. x * 0 = 1`,
  REWRITE_TAC[MULT_CLAUSES]);;

let THIRD_FACT = ARITH_RULE `2 + 2 = 4`;;
