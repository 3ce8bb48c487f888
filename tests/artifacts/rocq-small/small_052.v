Require Import List.
Import ListNotations.

Theorem lemma_52_0 : forall n : nat, 2 * n = n + n.
Proof.
  intros n.
  simpl.
  rewrite Nat.add_0_r.
  reflexivity.
Qed.

Theorem lemma_52_1 : forall (A : Type) (x : A) (l : list A), In x (x :: l).
Proof.
  intros A x l.
  simpl.
  left.
  reflexivity.
Qed.
