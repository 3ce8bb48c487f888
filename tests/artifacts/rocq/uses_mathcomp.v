(* Mathematical Components, as translated statements often use it. *)
From mathcomp Require Import ssreflect ssrbool ssrnat.

Lemma double_is_even (n : nat) : ~~ odd (n + n).
Proof. by rewrite addnn odd_double. Qed.
