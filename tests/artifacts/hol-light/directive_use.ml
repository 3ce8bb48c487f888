(* A failed #use does not fail its phrase in OCaml's toplevel, so checked files may not use it. *)
#use "does_not_exist.ml";;

let OK = ARITH_RULE `1 + 1 = 2`;;
