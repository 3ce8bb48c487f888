From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_99_0 : forall (A B : Type) (f : A -> B) (l : list A), length (map f l) = length l.
Proof.
  intros A B f l.
  apply map_length.
Qed.

Theorem lemma_99_1 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros.
  reflexivity.
Qed.

Theorem lemma_99_2 : forall (A : Type) (l m : list A), length (l ++ m) = length l + length m.
Proof.
  intros A l m.
  apply app_length.
Qed.
