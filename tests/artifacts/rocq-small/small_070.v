From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_70_0 : forall (A : Type) (x : A) (l : list A), In x (x :: l).
Proof.
  intros A x l.
  simpl.
  left.
  reflexivity.
Qed.

Theorem lemma_70_1 : forall n : nat, n * 3 = n + n + n.
Proof.
  intros n.
  lia.
Qed.

Theorem lemma_70_2 : forall n m : nat, n <= n + m.
Proof.
  intros n m.
  apply Nat.le_add_r.
Qed.
