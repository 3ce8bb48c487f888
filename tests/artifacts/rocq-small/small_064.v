Require Import Arith Lia.

Theorem lemma_64_0 : forall n : nat, n < n + 1.
Proof.
  intros n.
  lia.
Qed.
