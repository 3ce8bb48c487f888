(* An OCaml type error: prove wants a term and a tactic, not a string. *)
let TYPE_ERROR = prove (`1 = 1`, "REFL_TAC");;
