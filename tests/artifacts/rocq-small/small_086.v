Require Import Arith.

Theorem lemma_86_0 : forall n m : nat, n + S m = S (n + m).
Proof.
  induction n as [| n IH]; intros m.
  - reflexivity.
  - simpl.
    rewrite IH.
    reflexivity.
Qed.
