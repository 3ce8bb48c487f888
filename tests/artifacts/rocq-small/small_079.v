Require Import Arith.

Theorem lemma_79_0 : forall n m : nat, S n = S m -> n = m.
Proof.
  intros n m H.
  injection H as H.
  exact H.
Qed.

Theorem lemma_79_1 : forall n m : nat, n = m -> m = n.
Proof.
  intros n m H.
  symmetry.
  exact H.
Qed.

Theorem lemma_79_2 : forall n : nat, 2 * n = n + n.
Proof.
  intros n.
  simpl.
  rewrite Nat.add_0_r.
  reflexivity.
Qed.
