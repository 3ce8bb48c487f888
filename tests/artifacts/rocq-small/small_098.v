Require Import Arith.

Theorem lemma_98_0 : forall n m : nat, Nat.max n m = Nat.max m n.
Proof.
  intros n m.
  apply Nat.max_comm.
Qed.

Theorem lemma_98_1 : forall n : nat, n + 0 = n.
Proof.
  intros n.
  apply Nat.add_0_r.
Qed.
