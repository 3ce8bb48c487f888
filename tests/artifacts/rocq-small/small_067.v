Require Import Arith Lia.

Theorem lemma_67_0 : forall n m : nat, n = m -> m = n.
Proof.
  intros n m H.
  symmetry.
  exact H.
Qed.
