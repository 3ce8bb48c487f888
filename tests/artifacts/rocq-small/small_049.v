Require Import List.
Import ListNotations.

Theorem lemma_49_0 : forall n m : nat, Nat.max n m = Nat.max m n.
Proof.
  intros n m.
  apply Nat.max_comm.
Qed.
