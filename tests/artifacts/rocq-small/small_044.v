Require Import List.
Import ListNotations.

Theorem lemma_44_0 : forall n m : nat, n * m = m * n.
Proof.
  intros n m.
  apply Nat.mul_comm.
Qed.
