Require Import List.
Import ListNotations.

Theorem lemma_5_0 : forall (A : Type) (l m : list A), length (l ++ m) = length l + length m.
Proof.
  intros A l m.
  apply app_length.
Qed.

Theorem lemma_5_1 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros.
Admitted.

Theorem lemma_5_2 : forall (A : Type) (l : list A), rev (rev l) = l.
Proof.
  intros A l.
  apply rev_involutive.
Qed.
