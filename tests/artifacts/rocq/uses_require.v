Theorem needs_lia : forall n : nat, n + 1 > n.
Proof. intros; lia. Qed.
