Require Import Arith Lia.

Theorem lemma_92_0 : forall n m : nat, Nat.max n m = Nat.max m n.
Proof.
  intros n m.
  apply Nat.max_comm.
Qed.

Theorem lemma_92_1 : forall n m : nat, n * m = m * n.
Proof.
  intros n m.
  apply Nat.mul_comm.
Qed.

Theorem lemma_92_2 : forall n : nat, 2 * n = n + n.
Proof.
  intros n.
  simpl.
  rewrite Nat.add_0_r.
  reflexivity.
Qed.
