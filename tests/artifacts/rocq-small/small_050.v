Require Import Arith.

Theorem lemma_50_0 : forall n m : nat, n + S m = S (n + m).
Proof.
  induction n as [| n IH]; intros m.
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.

Theorem lemma_50_1 : forall n m : nat, n = m -> m = n.
Proof.
  intros n m H.
  symmetry.
  exact H.
Qed.

Theorem lemma_50_2 : forall n m : nat, n + m = m + n.
Proof.
  intros.
  reflexivity.
Qed.
