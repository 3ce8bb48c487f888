Require Import Arith.

Theorem lemma_21_0 : forall n : nat, n - n = 0.
Proof.
  intros n.
  apply Nat.sub_diag.
Qed.
