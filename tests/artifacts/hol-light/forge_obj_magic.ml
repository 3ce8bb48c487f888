(* Forges |- F without adding an axiom: HOL Light's kernel cannot see it, so the kit refuses Obj. *)
let FORGED : thm = Obj.magic (Some ([], `F`));;

let ANYTHING = CONTR `1 = 2` FORGED;;
