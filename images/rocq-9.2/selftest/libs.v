(* The Debian libraries the image carries must load and work: forky has Flocq and Bignums for
   9.2, not mathcomp, Coquelicot or Interval. *)
From Stdlib Require Import ZArith Lia Reals.
Lemma lia_works : forall n : nat, n + 0 = n.
Proof. intros; lia. Qed.

From Flocq Require Import Core.
From Bignums Require Import BigN.
Lemma bignums_works : (BigN.of_pos 2 + BigN.of_pos 2 == BigN.of_pos 4)%bigN.
Proof. reflexivity. Qed.
