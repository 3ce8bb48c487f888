(* A lemma the image must prove. *)
theory Good imports Main begin
lemma rev_rev_selftest: "rev (rev xs) = xs" by simp
end
