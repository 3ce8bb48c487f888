(* A finished proof using only the standard library. *)
Require Import Arith.

Theorem add_comm_example : forall n m : nat, n + m = m + n.
Proof.
  intros n m. apply Nat.add_comm.
Qed.
