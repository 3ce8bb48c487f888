(* Changes state that a later file in the same run must not see. *)
Require Import Lia.
Set Implicit Arguments.
Definition secret_constant := 42.
Notation "x +++ y" := (x + y) (at level 50).
Theorem secret_is_42 : secret_constant = 42.
Proof. reflexivity. Qed.
