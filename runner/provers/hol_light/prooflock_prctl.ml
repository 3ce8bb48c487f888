external nondumpable : unit -> int = "prooflock_nondumpable"
external subreaper : unit -> int = "prooflock_subreaper"
