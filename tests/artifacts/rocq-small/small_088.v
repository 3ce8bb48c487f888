Require Import List.
Import ListNotations.

Theorem lemma_88_0 : forall (A : Type) (l : list A), l ++ [] = l.
Proof.
  intros A l.
  induction l as [| x l IH].
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.

Theorem lemma_88_1 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros n.
  rewrite Nat.even_mul.
  reflexivity.
Qed.
