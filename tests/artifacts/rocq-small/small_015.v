From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_15_0 : forall n m : nat, S n = S m -> n = m.
Proof.
  intros n m H.
  injection H as H.
  exact H.
Qed.

Theorem lemma_15_1 : forall n m : nat, Nat.max n m = Nat.max m n.
Proof.
  intros.
  reflexivity.
Qed.

Theorem lemma_15_2 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.
