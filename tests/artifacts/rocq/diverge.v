Require Import NArith.
(* 10^11 iterations: never finishes within a test timeout. *)
Eval vm_compute in N.iter 100000000000%N (fun x => x) 0%N.
