From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_76_0 : forall x y : nat, x + y = y + x.
Proof.
  intros x y.
  lia.
Qed.

Theorem lemma_76_1 : forall n m p : nat, n + (m + p) = n + m + p.
Proof.
  intros n m p.
  apply Nat.add_assoc.
Qed.
