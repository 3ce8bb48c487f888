Require Import Arith.

Theorem lemma_85_0 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.

Theorem lemma_85_1 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros n.
  rewrite Nat.even_mul.
  reflexivity.
Qed.

Theorem lemma_85_2 : forall n : nat, n - n = 0.
Proof.
  intros n.
  apply Nat.sub_diag.
Qed.
