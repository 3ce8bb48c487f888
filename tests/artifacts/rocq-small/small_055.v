From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_55_0 : forall n m : nat, Nat.min n m <= n.
Proof.
  intros n m.
  apply Nat.le_min_l.
Qed.
