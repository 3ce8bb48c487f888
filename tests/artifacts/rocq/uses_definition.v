Theorem uses_secret : secret_constant = 42.
Proof. reflexivity. Qed.
