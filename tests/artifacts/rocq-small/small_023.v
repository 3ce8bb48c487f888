Require Import Arith.

Theorem lemma_23_0 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros n.
  rewrite Nat.even_mul.
  reflexivity.
Qed.

Theorem lemma_23_1 : forall n m : nat, n <= n + m.
Proof.
  intros n m.
  apply Nat.le_add_r.
Qed.
