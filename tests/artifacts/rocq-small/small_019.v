From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_19_0 : forall (A : Type) (l1 l2 l3 : list A), l1 ++ l2 ++ l3 = (l1 ++ l2) ++ l3.
Proof.
  intros.
Admitted.

Theorem lemma_19_1 : forall n m : nat, Nat.max n m = Nat.max m n.
Proof.
  intros n m.
  apply Nat.max_comm.
Qed.

Theorem lemma_19_2 : forall n : nat, n + 0 = n.
Proof.
  intros.
Admitted.
