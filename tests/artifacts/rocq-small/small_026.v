Require Import Arith Lia.

Theorem lemma_26_0 : forall n m : nat, n < m -> n + 1 <= m.
Proof.
  intros n m H.
  lia.
Qed.

Theorem lemma_26_1 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.
