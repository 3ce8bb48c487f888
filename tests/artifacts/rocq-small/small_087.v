From Coq Require Import Arith Lia List.
Import ListNotations.

Theorem lemma_87_0 : forall n : nat, n + 0 = n.
Proof.
  intros.
Admitted.

Theorem lemma_87_1 : forall n : nat, n + 0 = n.
Proof.
  intros n.
  apply Nat.add_0_r.
Qed.
