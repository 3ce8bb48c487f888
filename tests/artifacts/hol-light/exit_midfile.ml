let FINE = ARITH_RULE `1 + 1 = 2`;;

exit 0;;

let NEVER_CHECKED = prove (`1 = 2`, ARITH_TAC);;
