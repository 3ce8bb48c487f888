Require Import List.
Import ListNotations.

Theorem lemma_54_0 : forall n m : nat, n = m -> m = n.
Proof.
  intros n m H.
  symmetry.
  exact H.
Qed.

Theorem lemma_54_1 : forall n : nat, n + 0 = n.
Proof.
  intros.
  reflexivity.
Qed.
