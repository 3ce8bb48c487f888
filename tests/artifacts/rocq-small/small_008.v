From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_8_0 : forall n : nat, n + 0 = n.
Proof.
  intros n.
  apply Nat.add_0_r.
Qed.

Theorem lemma_8_1 : forall n : nat, n * 3 = n + n + n.
Proof.
  intros n.
  lia.
Qed.

Theorem lemma_8_2 : forall (A B : Type) (f : A -> B) (l : list A), length (map f l) = length l.
Proof.
  intros A B f l.
  apply map_length.
Qed.
