Require Import Arith.

Theorem lemma_59_0 : forall n m : nat, n + m = m + n.
Proof.
  intros n m.
  apply Nat.add_comm.
Qed.
