Require Import List.
Import ListNotations.

Theorem lemma_89_0 : forall (A : Type) (l : list A), l ++ [] = l.
Proof.
  intros A l.
  induction l as [| x l IH].
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.

Theorem lemma_89_1 : forall n m : nat, n = m -> m = n.
Proof.
  intros n m H.
  symmetry.
  exact H.
Qed.
