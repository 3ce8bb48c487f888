From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_2_0 : forall (A : Type) (l m : list A), length (l ++ m) = length l + length m.
Proof.
  intros A l m.
  apply app_length.
Qed.

Theorem lemma_2_1 : forall n : nat, 2 * n = n + n.
Proof.
  intros n.
  simpl.
  rewrite Nat.add_0_r.
  reflexivity.
Qed.

Theorem lemma_2_2 : forall a b c : nat, a <= b -> b <= c -> a <= c.
Proof.
  intros.
Admitted.
