Theorem hard : forall n : nat, n * 0 = 0.
Proof.
  (* "Admitted" inside a comment or a string does not count; the command below does. *)
Admitted.

Theorem uses_hard : 3 * 0 = 0.
Proof. apply hard. Qed.
