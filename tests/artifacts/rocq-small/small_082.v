Require Import Arith.

Theorem lemma_82_0 : forall n m p : nat, n + (m + p) = n + m + p.
Proof.
  intros n m p.
  apply Nat.add_assoc.
Qed.

Theorem lemma_82_1 : forall n m : nat, n * m = m * n.
Proof.
  intros n m.
  apply Nat.mul_comm.
Qed.
