From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_40_0 : forall n m : nat, n < m -> n + 1 <= m.
Proof.
  intros n m H.
  lia.
Qed.
