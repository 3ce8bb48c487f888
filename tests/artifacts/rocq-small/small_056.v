Require Import List.
Import ListNotations.

Theorem lemma_56_0 : forall n m : nat, Nat.min n m <= n.
Proof.
  intros n m.
  apply Nat.le_min_l.
Qed.
