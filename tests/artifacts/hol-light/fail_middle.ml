let FIRST = ARITH_RULE `1 + 1 = 2`;;

let SECOND = prove
 (`!x. x * 0 = 1`,
  REWRITE_TAC[MULT_CLAUSES]);;

let THIRD = ARITH_RULE `2 + 2 = 4`;;
