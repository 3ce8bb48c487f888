Require Import Arith Lia.

Theorem lemma_51_0 : forall n m : nat, Nat.min n m <= n.
Proof.
  intros n m.
  apply Nat.le_min_l.
Qed.
