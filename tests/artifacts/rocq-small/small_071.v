Require Import Arith Lia.

Theorem lemma_71_0 : forall n m : nat, n + m = m + n.
Proof.
  intros n m.
  apply Nat.add_comm.
Qed.

Theorem lemma_71_1 : forall n m : nat, n < m -> n + 1 <= m.
Proof.
  intros n m H.
  lia.
Qed.

Theorem lemma_71_2 : forall n m p : nat, n + (m + p) = n + m + p.
Proof.
  intros n m p.
  apply Nat.add_assoc.
Qed.
