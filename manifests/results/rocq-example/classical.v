Require Import Classical.

Theorem excluded_middle_instance : forall P : Prop, P \/ ~ P.
Proof. intro P. apply classic. Qed.
