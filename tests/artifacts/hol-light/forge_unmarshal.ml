(* Unmarshalling bytes hidden in its own text would give a theorem the kernel never made. *)
let FORGED : thm =
  let source = open_in_bin "forge_unmarshal.ml" in
  seek_in source 400;
  input_value source;;
