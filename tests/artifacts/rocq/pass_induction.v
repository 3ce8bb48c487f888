Require Import Lia.

Fixpoint sum_to (n : nat) : nat :=
  match n with
  | 0 => 0
  | S k => n + sum_to k
  end.

Lemma sum_to_double : forall n, 2 * sum_to n = n * (n + 1).
Proof.
  induction n as [| k IH]; simpl; lia.
Qed.

Module Inner.
  Lemma inner_fact : True. Proof. exact I. Qed.
End Inner.
