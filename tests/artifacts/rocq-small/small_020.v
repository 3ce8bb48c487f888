From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_20_0 : forall n : nat, 2 * n = n + n.
Proof.
  intros n.
  simpl.
  rewrite Nat.add_0_r.
  reflexivity.
Qed.
