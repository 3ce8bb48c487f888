Require Import List.
Import ListNotations.

Theorem lemma_78_0 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.

Theorem lemma_78_1 : forall n m : nat, S n = S m -> n = m.
Proof.
  intros n m H.
  injection H as H.
  exact H.
Qed.
