Require Import Arith Lia.

Theorem lemma_75_0 : forall n : nat, n + 0 = n.
Proof.
  intros n.
  apply Nat.add_0_r.
Qed.
