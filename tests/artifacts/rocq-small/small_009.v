From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_9_0 : forall (A : Type) (l : list A), l ++ [] = l.
Proof.
  intros A l.
  induction l as [| x l IH].
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.

Theorem lemma_9_1 : forall (A B : Type) (f : A -> B) (l : list A), length (map f l) = length l.
Proof.
  intros A B f l.
  apply map_length.
Qed.

Theorem lemma_9_2 : forall (A : Type) (l : list A), l ++ [] = l.
Proof.
  intros A l.
  induction l as [| x l IH].
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.
