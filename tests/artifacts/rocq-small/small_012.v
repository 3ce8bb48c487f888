From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_12_0 : forall n : nat, 2 * n = n + n.
Proof.
  intros n.
  lia.
Qed.
