Require Import List.
Import ListNotations.

Theorem lemma_28_0 : forall n m : nat, n + m = m + n.
Proof.
  intros n m.
  apply Nat.add_comm.
Qed.
