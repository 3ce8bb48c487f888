"""What every adapter shares: the verdict ladder, source lexing, and long-lived sandbox servers."""
