Require Import Arith.

Theorem lemma_18_0 : forall n : nat, n + 0 = n.
Proof.
  induction n as [| n IH].
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.

Theorem lemma_18_1 : forall n m : nat, Nat.max n m = Nat.max m n.
Proof.
  intros n m.
  apply Nat.max_comm.
Qed.

Theorem lemma_18_2 : forall n : nat, 2 * n = n + n.
Proof.
  intros n.
  simpl.
  rewrite Nat.add_0_r.
  reflexivity.
Qed.
