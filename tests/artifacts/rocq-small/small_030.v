From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_30_0 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.
