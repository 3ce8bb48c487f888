Require Import List.
Import ListNotations.

Theorem lemma_25_0 : forall n m : nat, n + S m = S (n + m).
Proof.
  induction n as [| n IH]; intros m.
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.
