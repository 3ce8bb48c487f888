Require Import List.
Import ListNotations.

Theorem lemma_29_0 : forall n : nat, 2 * n = n + n.
Proof.
  intros n.
  simpl.
  rewrite Nat.add_0_r.
  reflexivity.
Qed.

Theorem lemma_29_1 : forall n m : nat, n * m = m * n.
Proof.
  intros n m.
  apply Nat.mul_comm.
Qed.
