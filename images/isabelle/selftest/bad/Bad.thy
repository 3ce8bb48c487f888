(* A false lemma the image must refuse. *)
theory Bad imports Main begin
lemma false_selftest: "(2::nat) + 2 = 5" by simp
end
