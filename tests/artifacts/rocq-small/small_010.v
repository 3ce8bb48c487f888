Require Import Arith.

Theorem lemma_10_0 : forall n m : nat, n = m -> m = n.
Proof.
  intros n m H.
  symmetry.
  exact H.
Qed.
