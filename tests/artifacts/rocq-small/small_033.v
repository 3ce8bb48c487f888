Require Import Arith Lia.

Theorem lemma_33_0 : forall n : nat, n < n + 1.
Proof.
  intros n.
  lia.
Qed.
