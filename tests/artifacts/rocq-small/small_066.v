Require Import Arith.

Theorem lemma_66_0 : forall n : nat, n - n = 0.
Proof.
  intros.
  reflexivity.
Qed.
