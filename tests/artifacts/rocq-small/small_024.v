Require Import List.
Import ListNotations.

Theorem lemma_24_0 : forall (A : Type) (l1 l2 l3 : list A), l1 ++ l2 ++ l3 = (l1 ++ l2) ++ l3.
Proof.
  intros A l1 l2 l3.
  apply app_assoc.
Qed.

Theorem lemma_24_1 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.

Theorem lemma_24_2 : forall (A : Type) (l : list A), l ++ [] = l.
Proof.
  intros A l.
  apply app_nil_r.
Qed.
