(* A proof the image must accept. *)
Require Import Arith.

Lemma add_comm_example : forall n m : nat, n + m = m + n.
Proof. intros n m. apply Nat.add_comm. Qed.
