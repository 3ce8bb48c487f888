Theorem uses_notation : 1 +++ 1 = 2.
Proof. reflexivity. Qed.
