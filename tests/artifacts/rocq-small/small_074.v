Require Import List.
Import ListNotations.

Theorem lemma_74_0 : forall n m : nat, n = m -> m = n.
Proof.
  intros n m H.
  symmetry.
  exact H.
Qed.
