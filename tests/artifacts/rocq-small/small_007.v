Require Import List.
Import ListNotations.

Theorem lemma_7_0 : forall (A : Type) (l1 l2 l3 : list A), l1 ++ l2 ++ l3 = (l1 ++ l2) ++ l3.
Proof.
  intros A l1 l2 l3.
  apply app_assoc.
Qed.
