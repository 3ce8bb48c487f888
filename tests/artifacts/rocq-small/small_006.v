From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_6_0 : forall (A : Type) (x : A) (l : list A), In x (x :: l).
Proof.
  intros A x l.
  simpl.
  left.
  reflexivity.
Qed.
