From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_14_0 : forall x y : nat, x + y = y + x.
Proof.
  intros x y.
  lia.
Qed.

Theorem lemma_14_1 : forall n m : nat, n < m -> n + 1 <= m.
Proof.
  intros n m H.
  lia.
Qed.
