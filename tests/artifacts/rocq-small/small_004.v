From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_4_0 : forall n m : nat, S n = S m -> n = m.
Proof.
  intros n m H.
  injection H as H.
  exact H.
Qed.

Theorem lemma_4_1 : forall n : nat, n + 0 = n.
Proof.
  induction n as [| n IH].
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.
