(* The Debian libraries the image carries must load and work. *)
From mathcomp Require Import ssreflect ssrnat ssralg.
Lemma ssr_works : (2 + 2 = 4)%N.
Proof. by []. Qed.

From Coquelicot Require Import Coquelicot.
From Interval Require Import Tactic.
Require Import Reals.
Lemma interval_works : (1 <= sqrt 2 <= 2)%R.
Proof. interval. Qed.
