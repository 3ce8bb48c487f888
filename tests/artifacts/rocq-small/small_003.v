Require Import List.
Import ListNotations.

Theorem lemma_3_0 : forall n : nat, 2 * n = n + n.
Proof.
  intros.
  reflexivity.
Qed.
