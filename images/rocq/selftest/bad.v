(* A false statement the image must reject. *)
Lemma wrong : 2 + 2 = 5.
Proof. reflexivity. Qed.
