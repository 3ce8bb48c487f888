Theorem wrong : 1 + 1 = 3.
Proof.
  reflexivity.
Qed.
