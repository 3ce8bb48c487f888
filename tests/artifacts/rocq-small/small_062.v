Require Import Arith.

Theorem lemma_62_0 : forall n : nat, 2 * n = n + n.
Proof.
  intros n.
  simpl.
  rewrite Nat.add_0_r.
  reflexivity.
Qed.

Theorem lemma_62_1 : forall n : nat, n + 0 = n.
Proof.
  intros n.
  apply Nat.add_0_r.
Qed.

Theorem lemma_62_2 : forall n m : nat, n + m = m + n.
Proof.
  intros n m.
  apply Nat.add_comm.
Qed.
