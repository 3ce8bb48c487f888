Unset Guard Checking.
Fixpoint spin (n : nat) : False := spin n.
Set Guard Checking.

Theorem absurd : False.
Proof. exact (spin 0). Qed.
