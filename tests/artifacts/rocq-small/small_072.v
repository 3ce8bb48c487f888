Require Import Arith.

Theorem lemma_72_0 : forall n m : nat, n <= n + m.
Proof.
  intros n m.
  apply Nat.le_add_r.
Qed.

Theorem lemma_72_1 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.
