Require Import List.
Import ListNotations.

Theorem lemma_45_0 : forall (A : Type) (l : list A), length (rev l) = length l.
Proof.
  intros A l.
  apply rev_length.
Qed.
