From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_17_0 : forall x y : nat, x + y = y + x.
Proof.
  intros x y.
  lia.
Qed.

Theorem lemma_17_1 : forall n m p : nat, n + (m + p) = n + m + p.
Proof.
  intros n m p.
  apply Nat.add_assoc.
Qed.

Theorem lemma_17_2 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros n.
  rewrite Nat.even_mul.
  reflexivity.
Qed.
