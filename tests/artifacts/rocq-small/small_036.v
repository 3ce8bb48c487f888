Require Import Arith Lia.

Theorem lemma_36_0 : forall n m : nat, n - m <= n.
Proof.
  intros n m.
  lia.
Qed.
