(* Changes a later file could wrongly rely on: a constant, an infix, the interface, an OCaml value. *)
let double = new_definition `double n = n + n`;;

parse_as_infix("===", (12, "right"));;
override_interface("===", `(=):num->num->bool`);;

let MY_TAC = ARITH_TAC;;

let DOUBLE_TWO = prove (`double 2 = 4`, REWRITE_TAC[double] THEN ARITH_TAC);;
