From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_63_0 : forall n m : nat, Nat.max n m = Nat.max m n.
Proof.
  intros n m.
  apply Nat.max_comm.
Qed.

Theorem lemma_63_1 : forall n : nat, n * 1 = n.
Proof.
  intros n.
  apply Nat.mul_1_r.
Qed.

Theorem lemma_63_2 : forall n : nat, n * 3 = n + n + n.
Proof.
  intros.
Admitted.
