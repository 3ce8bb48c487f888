Require Import List.
Import ListNotations.

Theorem lemma_65_0 : forall (A : Type) (x : A) (l : list A), In x (x :: l).
Proof.
  intros A x l.
  simpl.
  left.
  reflexivity.
Qed.

Theorem lemma_65_1 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros.
  reflexivity.
Qed.
