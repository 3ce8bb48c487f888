Require Import Arith Lia.

Theorem lemma_35_0 : forall n m : nat, n < m -> n + 1 <= m.
Proof.
  intros n m H.
  lia.
Qed.
