let GOOD = ARITH_RULE `1 + 1 = 2`;;

let BROKEN = prove (`1 = 1`, REFL_TAC;;
