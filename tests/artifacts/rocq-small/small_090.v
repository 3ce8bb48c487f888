Require Import Arith Lia.

Theorem lemma_90_0 : forall n : nat, n - n = 0.
Proof.
  intros n.
  apply Nat.sub_diag.
Qed.

Theorem lemma_90_1 : forall n : nat, n + 0 = n.
Proof.
  induction n as [| n IH].
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.

Theorem lemma_90_2 : forall n : nat, n + 0 = n.
Proof.
  induction n as [| n IH].
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.
