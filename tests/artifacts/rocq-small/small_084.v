From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_84_0 : forall (A B : Type) (f : A -> B) (l : list A), length (map f l) = length l.
Proof.
  intros A B f l.
  apply map_length.
Qed.
