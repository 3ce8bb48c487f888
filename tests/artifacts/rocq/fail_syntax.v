Theorem broken : True.
Proof.
  exact (I.
Qed.
