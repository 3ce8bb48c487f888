Require Import Arith Lia.

Theorem lemma_81_0 : forall n m : nat, n + m = m + n.
Proof.
  intros n m.
  apply Nat.add_comm.
Qed.
