Require Import Arith.

Theorem lemma_0_0 : forall n m : nat, Nat.max n m = Nat.max m n.
Proof.
  intros n m.
  apply Nat.max_comm.
Qed.

Theorem lemma_0_1 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros n.
  rewrite Nat.even_mul.
  reflexivity.
Qed.
