Require Import Arith.

Theorem lemma_22_0 : forall n m : nat, n * m = m * n.
Proof.
  intros n m.
  apply Nat.mul_comm.
Qed.
