From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_39_0 : forall (A : Type) (l m : list A), length (l ++ m) = length l + length m.
Proof.
  intros A l m.
  apply app_length.
Qed.

Theorem lemma_39_1 : forall n m : nat, Nat.min n m <= n.
Proof.
  intros n m.
  apply Nat.le_min_l.
Qed.

Theorem lemma_39_2 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros n.
  rewrite Nat.even_mul.
  reflexivity.
Qed.
