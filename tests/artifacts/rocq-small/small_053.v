Require Import Arith.

Theorem lemma_53_0 : forall n m : nat, n <= n + m.
Proof.
  intros n m.
  apply Nat.le_add_r.
Qed.

Theorem lemma_53_1 : forall n m : nat, Nat.min n m <= n.
Proof.
  intros n m.
  apply Nat.le_min_l.
Qed.

Theorem lemma_53_2 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros n.
  rewrite Nat.even_mul.
  reflexivity.
Qed.
