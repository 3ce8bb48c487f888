Require Import List.
Import ListNotations.

Theorem lemma_60_0 : forall n m : nat, n + m = m + n.
Proof.
  intros n m.
  apply Nat.add_comm.
Qed.

Theorem lemma_60_1 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.
