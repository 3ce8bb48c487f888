Require Import List.
Import ListNotations.

Theorem lemma_57_0 : forall (A : Type) (l : list A), rev (rev l) = l.
Proof.
  intros A l.
  apply rev_involutive.
Qed.
