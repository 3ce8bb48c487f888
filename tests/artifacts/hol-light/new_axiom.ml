let MAGIC = new_axiom `!n. n + 1 = n`;;

let FALSE_THING = prove
 (`1 = 0`,
  MESON_TAC[MAGIC; ARITH_RULE `0 + 1 = 1`]);;
