Unset Universe Checking.
Definition Large := Type.
Definition Small : Large := Large.  (* Type : Type, the road to Girard's paradox *)
Theorem relies_on_it : True.
Proof. pose Small. exact I. Qed.
