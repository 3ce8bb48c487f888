From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_61_0 : forall n : nat, n - n = 0.
Proof.
  intros n.
  apply Nat.sub_diag.
Qed.

Theorem lemma_61_1 : forall n m : nat, n - m <= n.
Proof.
  intros n m.
  lia.
Qed.

Theorem lemma_61_2 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.
