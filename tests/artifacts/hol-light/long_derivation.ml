(* A derivation whose steps each make a large statement: INST copies the whole of it, 18,000
   times over a statement of 4,000 nodes, 1.7 GB if every step's statement were kept. HOL Light
   frees each once the next is made: neither the check nor its replay may keep them all. *)
let LONG_DERIVATION =
  let x = `x:bool` and y = `y:bool` in
  let big = itlist (fun _ acc -> mk_conj (acc, x)) (1--1000) x in
  let there_and_back th = INST [x, y] (INST [y, x] th) in
  funpow 9000 there_and_back (REFL big);;
