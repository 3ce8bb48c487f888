(* Each quote below opens no string in OCaml: a fence that thought so would not see the Obj. *)
let quote = '"';; let brace = {|"|};; let tick = '`';;
let FORGED : thm = Obj.magic (Some ([], `F`));;
let closing = "";;
