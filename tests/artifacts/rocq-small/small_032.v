From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_32_0 : forall n m : nat, S n = S m -> n = m.
Proof.
  intros n m H.
  injection H as H.
  exact H.
Qed.
