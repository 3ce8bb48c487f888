Require Import Arith Lia.

Theorem lemma_31_0 : forall a b c : nat, a <= b -> b <= c -> a <= c.
Proof.
  intros a b c H1 H2.
  lia.
Qed.

Theorem lemma_31_1 : forall a b c : nat, a <= b -> b <= c -> a <= c.
Proof.
  intros a b c H1 H2.
  lia.
Qed.

Theorem lemma_31_2 : forall n m : nat, n <= m -> exists k, m = n + k.
Proof.
  intros.
Admitted.
