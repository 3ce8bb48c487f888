Require Import List.
Import ListNotations.

Theorem lemma_93_0 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros n.
  rewrite Nat.even_mul.
  reflexivity.
Qed.
