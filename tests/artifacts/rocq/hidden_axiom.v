(* Search's default blacklist hides Private_* and *_subproof names: the axioms must still be found. *)
Axiom Private_escape : False.
Theorem Private_main : False.
Proof. exact Private_escape. Qed.

Axiom lemma_subproof : 1 = 2.
