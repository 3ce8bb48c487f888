Require Import Arith Lia.

Theorem lemma_58_0 : forall n m : nat, n * m = m * n.
Proof.
  intros n m.
  apply Nat.mul_comm.
Qed.
