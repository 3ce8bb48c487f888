Axiom magic : forall P : Prop, P.

Theorem anything : 0 = 1.
Proof. apply magic. Qed.
