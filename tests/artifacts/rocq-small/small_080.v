Require Import Arith Lia.

Theorem lemma_80_0 : forall n m : nat, n <= n + m.
Proof.
  intros n m.
  apply Nat.le_add_r.
Qed.
