Require Import Arith.

Theorem lemma_95_0 : forall n : nat, Nat.even (2 * n) = true.
Proof.
  intros n.
  rewrite Nat.even_mul.
  reflexivity.
Qed.

Theorem lemma_95_1 : forall n m p : nat, n + (m + p) = n + m + p.
Proof.
  intros n m p.
  apply Nat.add_assoc.
Qed.
