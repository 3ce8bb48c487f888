From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_37_0 : forall n m : nat, n + S m = S (n + m).
Proof.
  induction n as [| n IH]; intros m.
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.

Theorem lemma_37_1 : forall (A B : Type) (f : A -> B) (l : list A), length (map f l) = length l.
Proof.
  intros.
Admitted.
